// The disk group library, in the layout every group's plugin.cc has: the group's keys, the platform's backend
// (MakeDiskBackend), the service that owns it, and every API version (api.h). Name and version come from the build.
#include "csi_proxy/plugin.hpp"

#include <cctype>
#include <memory>
#include <string>
#include <string_view>

#include "api.h"
#include "disk_backend.h"
#include "disk_service.h"

namespace csi_proxy::disk {
namespace {

// ---- The group's keys ([groups.disk]; README "Configuration")
constexpr std::string_view kPartitionTypeKey = "partition_type";

// A GPT type GUID as text: 8-4-4-4-12 hex digits.
bool IsGuid(const std::string& text) {
  if (text.size() != 36) return false;
  for (size_t i = 0; i < text.size(); ++i) {
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? text[i] != '-' : !std::isxdigit(static_cast<unsigned char>(text[i]))) return false;
  }
  return true;
}

StatusOr<DiskBackendOptions> ReadKeys(const sdk::PluginConfig& config) {
  CSI_PROXY_RETURN_IF_ERROR(config.RequireKnownKeys({kPartitionTypeKey}));
  DiskBackendOptions options;
  CSI_PROXY_ASSIGN_OR_RETURN(std::string type, config.GetString(kPartitionTypeKey, options.gpt_partition_type));
  if (!IsGuid(type)) {
    return sdk::PluginConfig::KeyError(kPartitionTypeKey,
                                       "must be a GPT type GUID such as 0fc63daf-8483-4772-8e79-3d69d8477de4, not " +
                                           sdk::PluginConfig::QuoteValue(type));
  }
  for (char& c : type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  options.gpt_partition_type = type;
  options.state_dir = config.state_dir();
  return options;
}

// ---- The group: backend, service, API versions
class DiskPlugin final : public sdk::Plugin {
 public:
  Status Init(sdk::Host& host) override {
    CSI_PROXY_ASSIGN_OR_RETURN(DiskBackendOptions options, ReadKeys(host.config()));
    service_ = std::make_unique<DiskService>(MakeDiskBackend(options));
    AddApiVersions(host, *service_);
    sdk::LogInfo("disk group ready; new partitions get GPT type " + options.gpt_partition_type);
    return Status::Ok();
  }

 private:
  std::unique_ptr<DiskService> service_;  // owns the backend; the registered methods call it
};

}  // namespace
}  // namespace csi_proxy::disk

CSI_PROXY_GROUP_PLUGIN(csi_proxy::disk::DiskPlugin)

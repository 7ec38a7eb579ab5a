// The disk group library: reads the group's keys, builds the platform's backend and serves csi-proxy-disk-v1 and
// the older v1beta3, v1beta2, v1beta1 and v1alpha1 through the adapters of api.h.
#include "csi_proxy/plugin.hpp"

#include <cctype>
#include <memory>
#include <string>

#include "api.h"
#include "disk_backend.h"
#include "disk_service.h"

namespace csi_proxy::disk {
namespace {

constexpr const char* kPartitionTypeKey = "partition_type";

// A GPT type GUID as text: 8-4-4-4-12 hex digits.
bool IsGuid(const std::string& text) {
  if (text.size() != 36) return false;
  for (size_t i = 0; i < text.size(); ++i) {
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? text[i] != '-' : !std::isxdigit(static_cast<unsigned char>(text[i]))) return false;
  }
  return true;
}

class DiskPlugin : public sdk::Plugin {
 public:
  Status Init(sdk::Host& host) override {
    const sdk::PluginConfig& config = host.config();
    CSI_PROXY_RETURN_IF_ERROR(config.RequireKnownKeys({kPartitionTypeKey}));
    DiskBackendOptions options;
    auto type = config.GetString(kPartitionTypeKey, options.gpt_partition_type);
    if (!type.ok()) return type.status().WithContext("disk group");
    if (!IsGuid(*type)) {
      return InvalidArgument(
          "disk group: partition_type must be a GPT type GUID such as "
          "0fc63daf-8483-4772-8e79-3d69d8477de4, not '" +
          *type + "'");
    }
    std::string guid = *type;
    for (char& c : guid) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    options.gpt_partition_type = guid;
    options.state_dir = config.state_dir();
    service_ = std::make_unique<DiskService>(MakeDiskBackend(options));

    AddVersionsShapedLikeV1(host, *service_);
    AddVersionsShapedLikeV1alpha1(host, *service_);
    sdk::LogInfo("disk group ready; new partitions get GPT type " + guid);
    return Status::Ok();
  }

 private:
  std::unique_ptr<DiskService> service_;
};

}  // namespace
}  // namespace csi_proxy::disk

CSI_PROXY_PLUGIN(csi_proxy::disk::DiskPlugin, "disk", "0.1.0")

// The volume group library, in the layout every group's plugin.cc has: the group's keys, the platform's backend
// (MakeVolumeBackend), the service that owns it, and every API version (api.h). Name and version come from the
// build.
#include "csi_proxy/plugin.hpp"

#include <memory>
#include <string>
#include <string_view>

#include "api.h"
#include "path_policy.h"
#include "volume_backend.h"
#include "volume_service.h"

namespace csi_proxy::volume {
namespace {

// ---- The group's keys ([groups.volume]; README "Configuration")
constexpr std::string_view kDefaultFsTypeKey = "default_fs_type";
constexpr std::string_view kMountNosuidNodevKey = "mount_nosuid_nodev";

StatusOr<VolumeBackendOptions> ReadKeys(const sdk::PluginConfig& config) {
  CSI_PROXY_RETURN_IF_ERROR(config.RequireKnownKeys({kDefaultFsTypeKey, kMountNosuidNodevKey}));
  VolumeBackendOptions options;
  options.default_fs_type = std::string(SupportedFilesystems().front());  // ext4 on Linux, ntfs on Windows
  CSI_PROXY_ASSIGN_OR_RETURN(options.default_fs_type,
                             config.GetChoice(kDefaultFsTypeKey, options.default_fs_type, SupportedFilesystems()));
  CSI_PROXY_ASSIGN_OR_RETURN(options.mount_nosuid_nodev,
                             config.GetBool(kMountNosuidNodevKey, options.mount_nosuid_nodev));
  options.scratch_dir = config.state_dir() + "/volume/scratch";
  options.state_dir = config.state_dir();
  return options;
}

// ---- The group: backend, service, API versions
class VolumePlugin final : public sdk::Plugin {
 public:
  Status Init(sdk::Host& host) override {
    const sdk::PluginConfig& config = host.config();
    CSI_PROXY_ASSIGN_OR_RETURN(VolumeBackendOptions options, ReadKeys(config));
    auto policy = common::PathPolicy::Create(config.kubelet_path(), config.working_dirs());
    if (!policy.ok()) return policy.status().WithContext("[host] kubelet_path or working_dirs");
    if (policy->roots().empty()) {
      return FailedPrecondition("no allowed roots ([host] kubelet_path and working_dirs are empty)");
    }
    service_ = std::make_unique<VolumeService>(MakeVolumeBackend(*policy, options), *policy);
    AddApiVersions(host, *service_);
    sdk::LogInfo("volume group ready; FormatVolume creates " + options.default_fs_type + ", allowed roots " +
                 service_->policy().RootsForMessage());
    return Status::Ok();
  }

 private:
  std::unique_ptr<VolumeService> service_;  // owns the backend; the registered methods call it
};

}  // namespace
}  // namespace csi_proxy::volume

CSI_PROXY_GROUP_PLUGIN(csi_proxy::volume::VolumePlugin)

// The volume group library: reads the group's keys, builds the platform's backend and serves
// csi-proxy-volume-v1 and -v2alpha1 and the older v1beta3, v1beta2, v1beta1 and v1alpha1 through the adapters of
// api.h.
#include "csi_proxy/plugin.hpp"

#include <memory>
#include <string>

#include "api.h"
#include "path_policy.h"
#include "volume_backend.h"
#include "volume_service.h"

namespace csi_proxy::volume {
namespace {

constexpr const char* kDefaultFsTypeKey = "default_fs_type";
constexpr const char* kMountNosuidNodevKey = "mount_nosuid_nodev";

class VolumePlugin : public sdk::Plugin {
 public:
  Status Init(sdk::Host& host) override {
    const sdk::PluginConfig& config = host.config();
    CSI_PROXY_RETURN_IF_ERROR(config.RequireKnownKeys({kDefaultFsTypeKey, kMountNosuidNodevKey}));
    VolumeBackendOptions options;
    auto fs_type = config.GetString(kDefaultFsTypeKey, options.default_fs_type);
    if (!fs_type.ok()) return fs_type.status().WithContext("volume group");
    if (!IsSupportedFilesystem(*fs_type)) {
      return InvalidArgument("volume group: default_fs_type must be ext4, ext3, ext2 or xfs, not '" + *fs_type + "'");
    }
    options.default_fs_type = *fs_type;
    auto nosuid_nodev = config.GetBool(kMountNosuidNodevKey, options.mount_nosuid_nodev);
    if (!nosuid_nodev.ok()) return nosuid_nodev.status().WithContext("volume group");
    options.mount_nosuid_nodev = *nosuid_nodev;
    options.scratch_dir = config.state_dir() + "/volume/scratch";
    options.state_dir = config.state_dir();

    auto policy = common::PathPolicy::Create(config.kubelet_path(), config.working_dirs());
    if (!policy.ok()) return policy.status().WithContext("volume group ([host] kubelet_path or working_dirs)");
    if (policy->roots().empty()) {
      return FailedPrecondition("volume group: no allowed roots ([host] kubelet_path and working_dirs are empty)");
    }
    service_ = std::make_unique<VolumeService>(MakeVolumeBackend(*policy, options), *policy);

    AddVersionsShapedLikeV1(host, *service_);
    AddVersionsBeforeV1(host, *service_);

    sdk::LogInfo("volume group ready; FormatVolume creates " + options.default_fs_type + ", allowed roots " +
                 service_->policy().RootsForMessage());
    return Status::Ok();
  }

 private:
  std::unique_ptr<VolumeService> service_;
};

}  // namespace
}  // namespace csi_proxy::volume

CSI_PROXY_PLUGIN(csi_proxy::volume::VolumePlugin, "volume", "0.1.0")

// The filesystem group library: builds the allowed-roots policy from the node configuration and serves
// csi-proxy-filesystem-v1, v2alpha1 and the older v1beta2, v1beta1 and v1alpha1 through the adapters of api.h.
#include <memory>
#include <string>
#include <vector>

#include "api.h"
#include "csi_proxy/plugin.hpp"
#include "filesystem_backend.h"
#include "filesystem_service.h"
#include "path_policy.h"

namespace csi_proxy::filesystem {
namespace {

constexpr const char* kLinkTargetDirsKey = "link_target_dirs";

class FilesystemPlugin : public sdk::Plugin {
 public:
  Status Init(sdk::Host& host) override {
    const sdk::PluginConfig& config = host.config();
    CSI_PROXY_RETURN_IF_ERROR(config.RequireKnownKeys({kLinkTargetDirsKey}));
    // By default symlinks may lead into the SMB group's mount root (local_path links point there), so that
    // IsSymlink and CreateSymlink work on SMB-staged paths, as they do upstream.
    std::vector<std::string> link_target_dirs = {config.state_dir() + "/smb"};
    if (config.group_table().contains(kLinkTargetDirsKey)) {
      auto configured = config.GetStringArray(kLinkTargetDirsKey);
      if (!configured.ok()) return configured.status().WithContext("filesystem group");
      link_target_dirs = std::move(configured).value();
    }
    auto policy = common::PathPolicy::Create(config.kubelet_path(), config.working_dirs(), link_target_dirs);
    if (!policy.ok()) {
      return policy.status().WithContext("filesystem group ([host] kubelet_path, working_dirs or link_target_dirs)");
    }
    if (policy->roots().empty()) {
      return FailedPrecondition("filesystem group: no allowed roots ([host] kubelet_path and working_dirs are empty)");
    }
    service_ = std::make_unique<FilesystemService>(
        MakeFilesystemBackend(*policy, FilesystemOptions{config.state_dir(), sdk::HostLogSink()}), *policy);

    // In upstream's registration order.
    AddVersionsShapedLikeV1alpha1(host, *service_);
    AddVersionsShapedLikeV1(host, *service_);

    std::string targets;
    for (const auto& dir : service_->policy().link_target_dirs()) targets += (targets.empty() ? "" : ", ") + dir;
    sdk::LogInfo("filesystem group ready; allowed roots " + service_->policy().RootsForMessage() +
                 ", link target dirs [" + targets + "]");
    return Status::Ok();
  }

 private:
  std::unique_ptr<FilesystemService> service_;
};

}  // namespace
}  // namespace csi_proxy::filesystem

CSI_PROXY_PLUGIN(csi_proxy::filesystem::FilesystemPlugin, "filesystem", "0.1.0")

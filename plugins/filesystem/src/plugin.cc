// The filesystem group library, in the layout every group's plugin.cc has: the group's keys, the platform's
// backend (MakeFilesystemBackend), the service that owns it, and every API version (api.h). Name and version come
// from the build.
#include "csi_proxy/plugin.hpp"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "api.h"
#include "filesystem_backend.h"
#include "filesystem_service.h"
#include "path_policy.h"

namespace csi_proxy::filesystem {
namespace {

// ---- The group's keys ([groups.filesystem]; README "Configuration")
constexpr std::string_view kLinkTargetDirsKey = "link_target_dirs";

// The allowed roots ([host] kubelet_path and working_dirs) and the link target dirs.
StatusOr<common::PathPolicy> ReadKeys(const sdk::PluginConfig& config) {
  CSI_PROXY_RETURN_IF_ERROR(config.RequireKnownKeys({kLinkTargetDirsKey}));
  // By default symlinks may lead into the SMB group's mount root (local_path links point there), so that
  // IsSymlink and CreateSymlink work on SMB-staged paths, as they do upstream.
  CSI_PROXY_ASSIGN_OR_RETURN(std::vector<std::string> link_target_dirs,
                             config.GetStringArray(kLinkTargetDirsKey, {config.state_dir() + "/smb"}));
  auto roots = common::PathPolicy::Create(config.kubelet_path(), config.working_dirs());
  if (!roots.ok()) return roots.status().WithContext("[host] kubelet_path or working_dirs");
  if (roots->roots().empty()) {
    return FailedPrecondition("no allowed roots ([host] kubelet_path and working_dirs are empty)");
  }
  auto policy = common::PathPolicy::Create(config.kubelet_path(), config.working_dirs(), link_target_dirs);
  if (!policy.ok()) return sdk::PluginConfig::KeyError(kLinkTargetDirsKey, "is refused: " + policy.status().message());
  return policy;
}

// ---- The group: backend, service, API versions
class FilesystemPlugin final : public sdk::Plugin {
 public:
  Status Init(sdk::Host& host) override {
    const sdk::PluginConfig& config = host.config();
    CSI_PROXY_ASSIGN_OR_RETURN(common::PathPolicy policy, ReadKeys(config));
    service_ = std::make_unique<FilesystemService>(
        MakeFilesystemBackend(policy, FilesystemOptions{config.state_dir(), sdk::HostLogSink()}), policy);
    AddApiVersions(host, *service_);
    std::string targets;
    for (const auto& dir : policy.link_target_dirs()) targets += (targets.empty() ? "" : ", ") + dir;
    sdk::LogInfo("filesystem group ready; allowed roots " + policy.RootsForMessage() + ", link target dirs [" +
                 targets + "]");
    return Status::Ok();
  }

 private:
  std::unique_ptr<FilesystemService> service_;  // owns the backend; the registered methods call it
};

}  // namespace
}  // namespace csi_proxy::filesystem

CSI_PROXY_GROUP_PLUGIN(csi_proxy::filesystem::FilesystemPlugin)

// The filesystem group library: builds the allowed-roots policy from the node configuration and serves
// csi-proxy-filesystem-v1 and csi-proxy-filesystem-v2alpha1. Each version only adapts its messages to the one
// FilesystemService; the two share their message shapes, so one template registers both.
#include <memory>
#include <string>
#include <vector>

#include "csi_proxy/plugin.hpp"
#include "filesystem_service.h"
#include "path_policy.h"
#include "v1/filesystem.pb.h"
#include "v2alpha1/filesystem.pb.h"

namespace csi_proxy::filesystem {
namespace {

using sdk::CallContext;

constexpr const char* kLinkTargetDirsKey = "link_target_dirs";

// The methods v1 and v2alpha1 have in common; `Api` is the version's proto namespace wrapped in a type.
template <typename Api>
void AddCommonMethods(sdk::ServiceBuilder& svc, FilesystemService& fs) {
  using PathExistsRequest = typename Api::PathExistsRequest;
  using MkdirRequest = typename Api::MkdirRequest;
  using RmdirRequest = typename Api::RmdirRequest;
  using CreateSymlinkRequest = typename Api::CreateSymlinkRequest;
  using IsSymlinkRequest = typename Api::IsSymlinkRequest;

  svc.template Unary<PathExistsRequest, typename Api::PathExistsResponse>(
         "PathExists",
         [&fs](const PathExistsRequest& req, auto& resp, CallContext&) {
           auto exists = fs.PathExists(req.path());
           if (exists.ok()) resp.set_exists(*exists);
           return exists.status();
         })
      .template Unary<MkdirRequest, typename Api::MkdirResponse>(
          "Mkdir", [&fs](const MkdirRequest& req, auto&, CallContext&) { return fs.Mkdir(req.path()); })
      .template Unary<RmdirRequest, typename Api::RmdirResponse>(
          "Rmdir", [&fs](const RmdirRequest& req, auto&, CallContext&) { return fs.Rmdir(req.path(), req.force()); })
      .template Unary<CreateSymlinkRequest, typename Api::CreateSymlinkResponse>(
          "CreateSymlink", [&fs](const CreateSymlinkRequest& req, auto&,
                                 CallContext&) { return fs.CreateSymlink(req.source_path(), req.target_path()); })
      .template Unary<IsSymlinkRequest, typename Api::IsSymlinkResponse>(
          "IsSymlink", [&fs](const IsSymlinkRequest& req, auto& resp, CallContext&) {
            auto is_symlink = fs.IsSymlink(req.path());
            if (is_symlink.ok()) resp.set_is_symlink(*is_symlink);
            return is_symlink.status();
          });
}

#define CSI_PROXY_FILESYSTEM_MESSAGES(ns)                    \
  struct ns##Messages {                                      \
    using PathExistsRequest = ns::PathExistsRequest;         \
    using PathExistsResponse = ns::PathExistsResponse;       \
    using MkdirRequest = ns::MkdirRequest;                   \
    using MkdirResponse = ns::MkdirResponse;                 \
    using RmdirRequest = ns::RmdirRequest;                   \
    using RmdirResponse = ns::RmdirResponse;                 \
    using CreateSymlinkRequest = ns::CreateSymlinkRequest;   \
    using CreateSymlinkResponse = ns::CreateSymlinkResponse; \
    using IsSymlinkRequest = ns::IsSymlinkRequest;           \
    using IsSymlinkResponse = ns::IsSymlinkResponse;         \
  };
CSI_PROXY_FILESYSTEM_MESSAGES(v1)
CSI_PROXY_FILESYSTEM_MESSAGES(v2alpha1)
#undef CSI_PROXY_FILESYSTEM_MESSAGES

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
    service_ = std::make_unique<FilesystemService>(std::move(policy).value());

    AddCommonMethods<v1Messages>(host.AddService("v1", "v1.Filesystem"), *service_);

    auto& v2alpha1 = host.AddService("v2alpha1", "v2alpha1.Filesystem");
    AddCommonMethods<v2alpha1Messages>(v2alpha1, *service_);
    v2alpha1.Unary<v2alpha1::RmdirContentsRequest, v2alpha1::RmdirContentsResponse>(
        "RmdirContents",
        [fs = service_.get()](const v2alpha1::RmdirContentsRequest& req, v2alpha1::RmdirContentsResponse&,
                              CallContext&) { return fs->RmdirContents(req.path()); });

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

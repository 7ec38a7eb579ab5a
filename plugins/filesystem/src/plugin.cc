// The filesystem group library: builds the allowed-roots policy from the node configuration and serves
// csi-proxy-filesystem-v1, v2alpha1 and the older v1beta2, v1beta1 and v1alpha1. Each version only adapts its
// messages to the one FilesystemService. All versions share PathExists, Mkdir and Rmdir (the old versions' extra
// `context` field is ignored); in v1alpha1 and v1beta1, CreateSymlink and IsSymlink are named LinkPath and
// IsMountPoint.
#include <memory>
#include <string>
#include <vector>

#include "csi_proxy/plugin.hpp"
#include "filesystem_service.h"
#include "path_policy.h"
#include "v1/filesystem.pb.h"
#include "v1alpha1/filesystem.pb.h"
#include "v1beta1/filesystem.pb.h"
#include "v1beta2/filesystem.pb.h"
#include "v2alpha1/filesystem.pb.h"

namespace csi_proxy::filesystem {
namespace {

using sdk::CallContext;

constexpr const char* kLinkTargetDirsKey = "link_target_dirs";

// PathExists, Mkdir and Rmdir, which have the same names and fields in every version; `Api` is the version's
// proto namespace wrapped in a type.
template <typename Api>
void AddPathMethods(sdk::ServiceBuilder& svc, FilesystemService& fs) {
  using PathExistsRequest = typename Api::PathExistsRequest;
  using MkdirRequest = typename Api::MkdirRequest;
  using RmdirRequest = typename Api::RmdirRequest;

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
          "Rmdir", [&fs](const RmdirRequest& req, auto&, CallContext&) { return fs.Rmdir(req.path(), req.force()); });
}

// CreateSymlink under the version's method name (LinkPath in v1alpha1 and v1beta1); the fields are the same.
template <typename Req, typename Resp>
void AddCreateSymlink(sdk::ServiceBuilder& svc, FilesystemService& fs, const char* method) {
  svc.Unary<Req, Resp>(method, [&fs](const Req& req, Resp&, CallContext&) {
    return fs.CreateSymlink(req.source_path(), req.target_path());
  });
}

// IsSymlink under the version's method name (IsMountPoint in v1alpha1 and v1beta1); `set` stores the answer in
// the version's response field.
template <typename Req, typename Resp>
void AddIsSymlink(sdk::ServiceBuilder& svc, FilesystemService& fs, const char* method, void (Resp::*set)(bool)) {
  svc.Unary<Req, Resp>(method, [&fs, set](const Req& req, Resp& resp, CallContext&) {
    auto is_symlink = fs.IsSymlink(req.path());
    if (is_symlink.ok()) (resp.*set)(*is_symlink);
    return is_symlink.status();
  });
}

// The methods of v1, v1beta2 and v2alpha1.
template <typename Api>
void AddCurrentMethods(sdk::ServiceBuilder& svc, FilesystemService& fs) {
  AddPathMethods<Api>(svc, fs);
  AddCreateSymlink<typename Api::CreateSymlinkRequest, typename Api::CreateSymlinkResponse>(svc, fs, "CreateSymlink");
  AddIsSymlink<typename Api::IsSymlinkRequest, typename Api::IsSymlinkResponse>(
      svc, fs, "IsSymlink", &Api::IsSymlinkResponse::set_is_symlink);
}

// The methods of v1alpha1 and v1beta1. Their responses' `error` strings stay empty: failures are the status.
template <typename Api>
void AddLegacyMethods(sdk::ServiceBuilder& svc, FilesystemService& fs) {
  AddPathMethods<Api>(svc, fs);
  AddCreateSymlink<typename Api::LinkPathRequest, typename Api::LinkPathResponse>(svc, fs, "LinkPath");
  AddIsSymlink<typename Api::IsMountPointRequest, typename Api::IsMountPointResponse>(
      svc, fs, "IsMountPoint", &Api::IsMountPointResponse::set_is_mount_point);
}

#define CSI_PROXY_FILESYSTEM_PATH_MESSAGES(ns)       \
  using PathExistsRequest = ns::PathExistsRequest;   \
  using PathExistsResponse = ns::PathExistsResponse; \
  using MkdirRequest = ns::MkdirRequest;             \
  using MkdirResponse = ns::MkdirResponse;           \
  using RmdirRequest = ns::RmdirRequest;             \
  using RmdirResponse = ns::RmdirResponse;
#define CSI_PROXY_FILESYSTEM_CURRENT_MESSAGES(ns)            \
  struct ns##Messages {                                      \
    CSI_PROXY_FILESYSTEM_PATH_MESSAGES(ns)                   \
    using CreateSymlinkRequest = ns::CreateSymlinkRequest;   \
    using CreateSymlinkResponse = ns::CreateSymlinkResponse; \
    using IsSymlinkRequest = ns::IsSymlinkRequest;           \
    using IsSymlinkResponse = ns::IsSymlinkResponse;         \
  };
#define CSI_PROXY_FILESYSTEM_LEGACY_MESSAGES(ns)           \
  struct ns##Messages {                                    \
    CSI_PROXY_FILESYSTEM_PATH_MESSAGES(ns)                 \
    using LinkPathRequest = ns::LinkPathRequest;           \
    using LinkPathResponse = ns::LinkPathResponse;         \
    using IsMountPointRequest = ns::IsMountPointRequest;   \
    using IsMountPointResponse = ns::IsMountPointResponse; \
  };
CSI_PROXY_FILESYSTEM_CURRENT_MESSAGES(v1)
CSI_PROXY_FILESYSTEM_CURRENT_MESSAGES(v1beta2)
CSI_PROXY_FILESYSTEM_CURRENT_MESSAGES(v2alpha1)
CSI_PROXY_FILESYSTEM_LEGACY_MESSAGES(v1alpha1)
CSI_PROXY_FILESYSTEM_LEGACY_MESSAGES(v1beta1)
#undef CSI_PROXY_FILESYSTEM_LEGACY_MESSAGES
#undef CSI_PROXY_FILESYSTEM_CURRENT_MESSAGES
#undef CSI_PROXY_FILESYSTEM_PATH_MESSAGES

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

    // In upstream's registration order.
    AddLegacyMethods<v1alpha1Messages>(host.AddService("v1alpha1", "v1alpha1.Filesystem"), *service_);
    AddLegacyMethods<v1beta1Messages>(host.AddService("v1beta1", "v1beta1.Filesystem"), *service_);
    AddCurrentMethods<v1beta2Messages>(host.AddService("v1beta2", "v1beta2.Filesystem"), *service_);
    AddCurrentMethods<v1Messages>(host.AddService("v1", "v1.Filesystem"), *service_);

    auto& v2alpha1 = host.AddService("v2alpha1", "v2alpha1.Filesystem");
    AddCurrentMethods<v2alpha1Messages>(v2alpha1, *service_);
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

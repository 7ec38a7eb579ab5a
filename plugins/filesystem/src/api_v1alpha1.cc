// v1alpha1 and v1beta1 of the filesystem group: one message shape, one template. CreateSymlink and IsSymlink are
// named LinkPath and IsMountPoint here; the responses' `error` strings stay empty: failures are the status.
#include "api.h"
#include "v1alpha1/filesystem.csi.h"
#include "v1beta1/filesystem.csi.h"

namespace csi_proxy::filesystem {
namespace {

using sdk::CallContext;

template <typename Api>
void AddV1alpha1Methods(sdk::Host& host, FilesystemService& fs) {
  AddPathMethods<Api>(host.AddService<Api>(), fs)
      .template Unary<typename Api::LinkPath>([&fs](const auto& req, auto&, CallContext&) {
        return fs.CreateSymlink(req.source_path(), req.target_path());
      })
      .template Unary<typename Api::IsMountPoint>(
          [&fs](const auto& req, auto& resp, CallContext&) {
            CSI_PROXY_ASSIGN_OR_RETURN(bool is_symlink, fs.IsSymlink(req.path()));
            resp.set_is_mount_point(is_symlink);
            return Status::Ok();
          },
          sdk::kReadOnly);
}

}  // namespace

void AddVersionsShapedLikeV1alpha1(sdk::Host& host, FilesystemService& fs) {
  AddV1alpha1Methods<v1alpha1::FilesystemApi>(host, fs);
  AddV1alpha1Methods<v1beta1::FilesystemApi>(host, fs);
}

}  // namespace csi_proxy::filesystem

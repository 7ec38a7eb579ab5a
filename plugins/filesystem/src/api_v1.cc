// v1, v1beta2 and v2alpha1 of the filesystem group: one message shape, one template; v2alpha1 adds RmdirContents.
#include "api.h"
#include "v1/filesystem.csi.h"
#include "v1beta2/filesystem.csi.h"
#include "v2alpha1/filesystem.csi.h"

namespace csi_proxy::filesystem {
namespace {

using sdk::CallContext;

template <typename Api>
sdk::ServiceBuilder& AddV1Methods(sdk::Host& host, FilesystemService& fs) {
  return AddPathMethods<Api>(host.AddService<Api>(), fs)
      .template Unary<typename Api::CreateSymlink>([&fs](const auto& req, auto&, CallContext&) {
        return fs.CreateSymlink(req.source_path(), req.target_path());
      })
      .template Unary<typename Api::IsSymlink>(
          [&fs](const auto& req, auto& resp, CallContext&) {
            CSI_PROXY_ASSIGN_OR_RETURN(bool is_symlink, fs.IsSymlink(req.path()));
            resp.set_is_symlink(is_symlink);
            return Status::Ok();
          },
          sdk::kReadOnly);
}

}  // namespace

void AddVersionsShapedLikeV1(sdk::Host& host, FilesystemService& fs) {
  AddV1Methods<v1beta2::FilesystemApi>(host, fs);
  AddV1Methods<v1::FilesystemApi>(host, fs);
  AddV1Methods<v2alpha1::FilesystemApi>(host, fs).Unary<v2alpha1::FilesystemApi::RmdirContents>(
      [&fs](const auto& req, auto&, CallContext&) { return fs.RmdirContents(req.path()); });
}

void AddApiVersions(sdk::Host& host, FilesystemService& fs) {
  AddVersionsShapedLikeV1alpha1(host, fs);
  AddVersionsShapedLikeV1(host, fs);
}

}  // namespace csi_proxy::filesystem

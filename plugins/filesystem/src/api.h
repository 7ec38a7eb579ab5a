// The filesystem group's API versions: each adapts its messages to the one FilesystemService. One adapter file per
// message shape, named after the newest version of that shape: api_v1.cc serves v1, v1beta2 and v2alpha1 (v2alpha1
// adds RmdirContents), api_v1alpha1.cc serves v1alpha1 and v1beta1 (CreateSymlink and IsSymlink are named LinkPath
// and IsMountPoint).
#pragma once

#include "csi_proxy/plugin.hpp"
#include "filesystem_service.h"

namespace csi_proxy::filesystem {

// Declares every version on `host`, in upstream's registration order (api_v1.cc). `fs` must outlive the
// registration.
void AddApiVersions(sdk::Host& host, FilesystemService& fs);

// The versions of each shape: v1alpha1 and v1beta1 (api_v1alpha1.cc); v1beta2, v1 and v2alpha1 (api_v1.cc).
void AddVersionsShapedLikeV1alpha1(sdk::Host& host, FilesystemService& fs);
void AddVersionsShapedLikeV1(sdk::Host& host, FilesystemService& fs);

// PathExists, Mkdir and Rmdir, which have the same names and fields in every version (the old versions' extra
// `context` field is ignored). `Api` is a service struct generated into <version>/filesystem.csi.h.
template <typename Api>
sdk::ServiceBuilder& AddPathMethods(sdk::ServiceBuilder& svc, FilesystemService& fs) {
  using sdk::CallContext;
  return svc
      .template Unary<typename Api::PathExists>(
          [&fs](const auto& req, auto& resp, CallContext&) {
            CSI_PROXY_ASSIGN_OR_RETURN(bool exists, fs.PathExists(req.path()));
            resp.set_exists(exists);
            return Status::Ok();
          },
          sdk::kReadOnly)
      .template Unary<typename Api::Mkdir>([&fs](const auto& req, auto&, CallContext&) { return fs.Mkdir(req.path()); })
      .template Unary<typename Api::Rmdir>(
          [&fs](const auto& req, auto&, CallContext&) { return fs.Rmdir(req.path(), req.force()); });
}

}  // namespace csi_proxy::filesystem

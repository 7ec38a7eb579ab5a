// Read-only methods of the filesystem group (v1, v2alpha1): PathExists and IsSymlink below the kubelet tree.
#include "method_bench.h"
#include "v1/filesystem.pb.h"
#include "v2alpha1/filesystem.pb.h"

namespace {

using csi_proxy::bench::MethodCase;
using csi_proxy::bench::MethodFixture;
using csi_proxy::bench::ParsesAs;

template <typename Req>
std::string PathRequest(const std::string& path) {
  Req req;
  req.set_path(path);
  return req.SerializeAsString();
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<MethodCase> cases = {
      {"csi-proxy-filesystem-v1", "/v1.Filesystem/PathExists",
       [](const MethodFixture& f) { return PathRequest<v1::PathExistsRequest>(f.existing_dir); },
       ParsesAs<v1::PathExistsResponse>([](const v1::PathExistsResponse& r, const MethodFixture&) {
         return r.exists() ? "" : "says an existing directory does not exist";
       })},
      {"csi-proxy-filesystem-v1", "/v1.Filesystem/IsSymlink",
       [](const MethodFixture& f) { return PathRequest<v1::IsSymlinkRequest>(f.symlink_path); },
       ParsesAs<v1::IsSymlinkResponse>([](const v1::IsSymlinkResponse& r, const MethodFixture&) {
         return r.is_symlink() ? "" : "says a symlink is not one";
       })},
      {"csi-proxy-filesystem-v2alpha1", "/v2alpha1.Filesystem/PathExists",
       [](const MethodFixture& f) { return PathRequest<v2alpha1::PathExistsRequest>(f.existing_dir); },
       ParsesAs<v2alpha1::PathExistsResponse>()},
  };
  return csi_proxy::bench::RunMethodBenchmarks(argc, argv, "filesystem", cases);
}

// v1 and v2alpha1 of the volume group: one message shape, one template; v2alpha1 adds
// GetClosestVolumeIDFromTargetPath.
#include "api.h"
#include "v1/volume.csi.h"
#include "v2alpha1/volume.csi.h"

namespace csi_proxy::volume {

void AddVersionsShapedLikeV1(sdk::Host& host, VolumeService& vs) {
  AddV1Methods<v1::VolumeApi>(host.AddService<v1::VolumeApi>(), vs);
  using V2alpha1 = v2alpha1::VolumeApi;
  AddV1Methods<V2alpha1>(host.AddService<V2alpha1>(), vs)
      .Unary<V2alpha1::GetClosestVolumeIDFromTargetPath>(
          [&vs](const auto& req, auto& resp, sdk::CallContext&) {
            CSI_PROXY_ASSIGN_OR_RETURN(std::string id, vs.GetClosestVolumeIdFromTargetPath(req.target_path()));
            resp.set_volume_id(id);
            return Status::Ok();
          },
          sdk::kReadOnly);
}

void AddApiVersions(sdk::Host& host, VolumeService& vs) {
  AddVersionsShapedLikeV1(host, vs);
  AddVersionsShapedLikeV1beta3(host, vs);
}

}  // namespace csi_proxy::volume

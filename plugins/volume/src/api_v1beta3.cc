// v1beta3, v1beta2, v1beta1 and v1alpha1 of the volume group. DismountVolume, VolumeStats, GetVolumeDiskNumber and
// GetVolumeIDFromMount are the older names of UnmountVolume, GetVolumeStats, GetDiskNumberFromVolumeID and
// GetVolumeIDFromTargetPath. v1beta3 has v1's methods besides; v1beta2, v1beta1 and v1alpha1 name disks by
// decimal strings and use `path` and `size` fields.
#include "api.h"
#include "v1alpha1/volume.csi.h"
#include "v1beta1/volume.csi.h"
#include "v1beta2/volume.csi.h"
#include "v1beta3/volume.csi.h"

namespace csi_proxy::volume {
namespace {

using sdk::CallContext;

template <typename Api>
sdk::ServiceBuilder& AddDismount(sdk::ServiceBuilder& svc, VolumeService& vs) {
  return svc.template Unary<typename Api::DismountVolume>(
      [&vs](const auto& req, auto&, CallContext&) { return vs.UnmountVolume(req.volume_id(), req.path()); });
}

// VolumeStats, GetVolumeDiskNumber and GetVolumeIDFromMount; the field names differ between versions.
template <typename Api>
sdk::ServiceBuilder& AddRenamedQueries(sdk::ServiceBuilder& svc, VolumeService& vs) {
  return svc
      .template Unary<typename Api::VolumeStats>(
          [&vs](const auto& req, auto& resp, CallContext&) {
            CSI_PROXY_ASSIGN_OR_RETURN(VolumeStats stats, vs.GetVolumeStats(req.volume_id()));
            if constexpr (requires { resp.set_volume_size(int64_t{0}); }) {  // v1beta3
              resp.set_volume_size(stats.total_bytes);
              resp.set_volume_used_size(stats.used_bytes);
            } else {
              resp.set_volumesize(stats.total_bytes);
              resp.set_volumeusedsize(stats.used_bytes);
            }
            return Status::Ok();
          },
          sdk::kReadOnly)
      .template Unary<typename Api::GetVolumeDiskNumber>(
          [&vs](const auto& req, auto& resp, CallContext&) {
            CSI_PROXY_ASSIGN_OR_RETURN(uint32_t number, vs.GetDiskNumberFromVolumeId(req.volume_id()));
            if constexpr (requires { resp.set_disknumber(int64_t{0}); }) {
              resp.set_disknumber(number);
            } else {
              resp.set_disk_number(number);
            }
            return Status::Ok();
          },
          sdk::kReadOnly)
      .template Unary<typename Api::GetVolumeIDFromMount>(
          [&vs](const auto& req, auto& resp, CallContext&) {
            CSI_PROXY_ASSIGN_OR_RETURN(std::string id, vs.GetVolumeIdFromTargetPath(req.mount()));
            resp.set_volume_id(id);
            return Status::Ok();
          },
          sdk::kReadOnly);
}

// v1alpha1, v1beta1 and v1beta2: string disk IDs, `path` and `size` fields.
template <typename Api>
sdk::ServiceBuilder& AddStringIdMethods(sdk::Host& host, VolumeService& vs) {
  auto& svc = host.AddService<Api>()
                  .template Unary<typename Api::ListVolumesOnDisk>(
                      [&vs](const auto& req, auto& resp, CallContext&) {
                        CSI_PROXY_ASSIGN_OR_RETURN(uint32_t number, VolumeService::ParseDiskId(req.disk_id()));
                        CSI_PROXY_ASSIGN_OR_RETURN(auto ids, vs.ListVolumesOnDisk(number, 0));
                        for (const auto& id : ids) resp.add_volume_ids(id);
                        return Status::Ok();
                      },
                      sdk::kReadOnly)
                  .template Unary<typename Api::MountVolume>([&vs](const auto& req, auto&, CallContext&) {
                    return vs.MountVolume(req.volume_id(), req.path());
                  });
  return AddDismount<Api>(svc, vs)
      .template Unary<typename Api::IsVolumeFormatted>(
          [&vs](const auto& req, auto& resp, CallContext&) {
            CSI_PROXY_ASSIGN_OR_RETURN(bool formatted, vs.IsVolumeFormatted(req.volume_id()));
            resp.set_formatted(formatted);
            return Status::Ok();
          },
          sdk::kReadOnly)
      .template Unary<typename Api::FormatVolume>(
          [&vs](const auto& req, auto&, CallContext&) { return vs.FormatVolume(req.volume_id()); })
      .template Unary<typename Api::ResizeVolume>(
          [&vs](const auto& req, auto&, CallContext&) { return vs.ResizeVolume(req.volume_id(), req.size()); });
}

}  // namespace

void AddVersionsShapedLikeV1beta3(sdk::Host& host, VolumeService& vs) {
  using V1beta3 = v1beta3::VolumeApi;
  AddRenamedQueries<V1beta3>(AddDismount<V1beta3>(AddV1Methods<V1beta3>(host.AddService<V1beta3>(), vs), vs), vs);

  using V1beta2 = v1beta2::VolumeApi;
  AddRenamedQueries<V1beta2>(AddStringIdMethods<V1beta2>(host, vs), vs)
      .Unary<V1beta2::WriteVolumeCache>(
          [&vs](const auto& req, auto&, CallContext&) { return vs.WriteVolumeCache(req.volume_id()); });

  AddRenamedQueries<v1beta1::VolumeApi>(AddStringIdMethods<v1beta1::VolumeApi>(host, vs), vs);
  AddStringIdMethods<v1alpha1::VolumeApi>(host, vs);
}

}  // namespace csi_proxy::volume

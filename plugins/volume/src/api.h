// The volume group's API versions: each only adapts its messages to the one VolumeService. One adapter file per
// message shape, named after the newest version of that shape: api_v1.cc serves v1 and v2alpha1 (v2alpha1 adds
// GetClosestVolumeIDFromTargetPath), api_v1beta3.cc serves v1beta3 (v1's methods plus the older names) and
// v1beta2, v1beta1 and v1alpha1 (the older method names, string disk IDs, `path` and `size` fields).
#pragma once

#include <cstdint>

#include "csi_proxy/plugin.hpp"
#include "volume_service.h"

namespace csi_proxy::volume {

// Declares every version on `host` (api_v1.cc). `vs` must outlive the registration.
void AddApiVersions(sdk::Host& host, VolumeService& vs);

// The versions of each shape: v1 and v2alpha1 (api_v1.cc); v1beta3, v1beta2, v1beta1 and v1alpha1
// (api_v1beta3.cc).
void AddVersionsShapedLikeV1(sdk::Host& host, VolumeService& vs);
void AddVersionsShapedLikeV1beta3(sdk::Host& host, VolumeService& vs);

// The methods v1, v2alpha1 and v1beta3 have in common. `Api` is a service struct generated into
// <version>/volume.csi.h.
template <typename Api>
sdk::ServiceBuilder& AddV1Methods(sdk::ServiceBuilder& svc, VolumeService& vs) {
  using sdk::CallContext;
  return svc
      .template Unary<typename Api::ListVolumesOnDisk>(
          [&vs](const auto& req, auto& resp, CallContext&) {
            CSI_PROXY_ASSIGN_OR_RETURN(auto ids, vs.ListVolumesOnDisk(req.disk_number(), req.partition_number()));
            for (const auto& id : ids) resp.add_volume_ids(id);
            return Status::Ok();
          },
          sdk::kReadOnly)
      .template Unary<typename Api::MountVolume>(
          [&vs](const auto& req, auto&, CallContext&) { return vs.MountVolume(req.volume_id(), req.target_path()); })
      .template Unary<typename Api::UnmountVolume>(
          [&vs](const auto& req, auto&, CallContext&) { return vs.UnmountVolume(req.volume_id(), req.target_path()); })
      .template Unary<typename Api::IsVolumeFormatted>(
          [&vs](const auto& req, auto& resp, CallContext&) {
            CSI_PROXY_ASSIGN_OR_RETURN(bool formatted, vs.IsVolumeFormatted(req.volume_id()));
            resp.set_formatted(formatted);
            return Status::Ok();
          },
          sdk::kReadOnly)
      .template Unary<typename Api::FormatVolume>([&vs](const auto& req, auto&, CallContext&) {
        FormatOptions options;
        if constexpr (requires { req.fs_type(); }) {  // csi-proxy's own fields of v1 and v2alpha1 (format_options.h)
          options.fs_type = req.fs_type();
          options.mkfs_options.assign(req.format_options().begin(), req.format_options().end());
        }
        return vs.FormatVolume(req.volume_id(), options);
      })
      .template Unary<typename Api::ResizeVolume>(
          [&vs](const auto& req, auto&, CallContext&) { return vs.ResizeVolume(req.volume_id(), req.size_bytes()); })
      .template Unary<typename Api::GetVolumeStats>(
          [&vs](const auto& req, auto& resp, CallContext&) {
            CSI_PROXY_ASSIGN_OR_RETURN(VolumeStats stats, vs.GetVolumeStats(req.volume_id()));
            resp.set_total_bytes(stats.total_bytes);
            resp.set_used_bytes(stats.used_bytes);
            return Status::Ok();
          },
          sdk::kReadOnly)
      .template Unary<typename Api::GetDiskNumberFromVolumeID>(
          [&vs](const auto& req, auto& resp, CallContext&) {
            CSI_PROXY_ASSIGN_OR_RETURN(uint32_t number, vs.GetDiskNumberFromVolumeId(req.volume_id()));
            resp.set_disk_number(number);
            return Status::Ok();
          },
          sdk::kReadOnly)
      .template Unary<typename Api::GetVolumeIDFromTargetPath>(
          [&vs](const auto& req, auto& resp, CallContext&) {
            CSI_PROXY_ASSIGN_OR_RETURN(std::string id, vs.GetVolumeIdFromTargetPath(req.target_path()));
            resp.set_volume_id(id);
            return Status::Ok();
          },
          sdk::kReadOnly)
      .template Unary<typename Api::WriteVolumeCache>(
          [&vs](const auto& req, auto&, CallContext&) { return vs.WriteVolumeCache(req.volume_id()); });
}

}  // namespace csi_proxy::volume

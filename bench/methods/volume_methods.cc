// Read-only methods of the volume group (v1, v2alpha1) on a partitioned, formatted and mounted loop device.
#include "method_bench.h"
#include "v1/volume.pb.h"
#include "v2alpha1/volume.pb.h"

namespace {

using csi_proxy::bench::MethodCase;
using csi_proxy::bench::MethodFixture;
using csi_proxy::bench::ParsesAs;

template <typename Req>
std::string VolumeRequest(const std::string& volume_id) {
  Req req;
  req.set_volume_id(volume_id);
  return req.SerializeAsString();
}

template <typename Req>
std::string TargetPathRequest(const std::string& target_path) {
  Req req;
  req.set_target_path(target_path);
  return req.SerializeAsString();
}

}  // namespace

int main(int argc, char** argv) {
  const bool kNeedsVolume = true;
  std::vector<MethodCase> cases = {
      {"csi-proxy-volume-v1", "/v1.Volume/ListVolumesOnDisk",
       [](const MethodFixture& f) {
         v1::ListVolumesOnDiskRequest req;
         req.set_disk_number(static_cast<uint32_t>(f.formatted_disk_number));
         return req.SerializeAsString();
       },
       ParsesAs<v1::ListVolumesOnDiskResponse>([](const v1::ListVolumesOnDiskResponse& r, const MethodFixture& f) {
         for (const auto& id : r.volume_ids()) {
           if (id == f.volume_id) return std::string();
         }
         return "does not list " + f.volume_id;
       }),
       kNeedsVolume},
      {"csi-proxy-volume-v1", "/v1.Volume/IsVolumeFormatted",
       [](const MethodFixture& f) { return VolumeRequest<v1::IsVolumeFormattedRequest>(f.volume_id); },
       ParsesAs<v1::IsVolumeFormattedResponse>([](const v1::IsVolumeFormattedResponse& r, const MethodFixture&) {
         return r.formatted() ? "" : "says an ext4 volume is not formatted";
       }),
       kNeedsVolume},
      {"csi-proxy-volume-v1", "/v1.Volume/GetVolumeStats",
       [](const MethodFixture& f) { return VolumeRequest<v1::GetVolumeStatsRequest>(f.volume_id); },
       ParsesAs<v1::GetVolumeStatsResponse>([](const v1::GetVolumeStatsResponse& r, const MethodFixture&) {
         return r.total_bytes() > 0 ? "" : "reports a size of 0";
       }),
       kNeedsVolume},
      {"csi-proxy-volume-v1", "/v1.Volume/GetDiskNumberFromVolumeID",
       [](const MethodFixture& f) { return VolumeRequest<v1::GetDiskNumberFromVolumeIDRequest>(f.volume_id); },
       ParsesAs<v1::GetDiskNumberFromVolumeIDResponse>(
           [](const v1::GetDiskNumberFromVolumeIDResponse& r, const MethodFixture& f) {
             return r.disk_number() == f.formatted_disk_number ? "" : "names disk " + std::to_string(r.disk_number());
           }),
       kNeedsVolume},
      {"csi-proxy-volume-v1", "/v1.Volume/GetVolumeIDFromTargetPath",
       [](const MethodFixture& f) {
         return TargetPathRequest<v1::GetVolumeIDFromTargetPathRequest>(f.volume_mount_path);
       },
       ParsesAs<v1::GetVolumeIDFromTargetPathResponse>(
           [](const v1::GetVolumeIDFromTargetPathResponse& r, const MethodFixture& f) {
             return r.volume_id() == f.volume_id ? "" : "names " + r.volume_id();
           }),
       kNeedsVolume},
      {"csi-proxy-volume-v2alpha1", "/v2alpha1.Volume/GetClosestVolumeIDFromTargetPath",
       [](const MethodFixture& f) {
         return TargetPathRequest<v2alpha1::GetClosestVolumeIDFromTargetPathRequest>(f.volume_mount_path);
       },
       ParsesAs<v2alpha1::GetClosestVolumeIDFromTargetPathResponse>(
           [](const v2alpha1::GetClosestVolumeIDFromTargetPathResponse& r, const MethodFixture& f) {
             return r.volume_id() == f.volume_id ? "" : "names " + r.volume_id();
           }),
       kNeedsVolume},
  };
  csi_proxy::bench::MethodBenchOptions options;
  options.formatted_volume = true;
  options.trivial_baseline = true;  // issue 12: each method's p50 against PathExists through the same host
  return csi_proxy::bench::RunMethodBenchmarks(argc, argv, "volume", cases, options);
}

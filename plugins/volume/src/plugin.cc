// The volume group library: serves csi-proxy-volume-v1 and -v2alpha1, and the older v1beta3, v1beta2, v1beta1
// and v1alpha1. Each version only adapts its messages to the one VolumeService. v1, v2alpha1 and v1beta3 share
// their message shapes (one template); the older versions use the earlier method names and string disk IDs.
#include "csi_proxy/plugin.hpp"

#include <memory>
#include <string>

#include "block_devices_linux.h"
#include "path_policy.h"
#include "v1/volume.pb.h"
#include "v1alpha1/volume.pb.h"
#include "v1beta1/volume.pb.h"
#include "v1beta2/volume.pb.h"
#include "v1beta3/volume.pb.h"
#include "v2alpha1/volume.pb.h"
#include "volume_backend_linux.h"
#include "volume_service.h"

namespace csi_proxy::volume {
namespace {

using sdk::CallContext;

constexpr const char* kDefaultFsTypeKey = "default_fs_type";

// The message types of one API version, so the methods v1 and v2alpha1 share are registered by one template.
#define CSI_PROXY_VOLUME_MESSAGES(ns)                                                \
  struct ns##Messages {                                                              \
    using ListVolumesOnDiskRequest = ns::ListVolumesOnDiskRequest;                   \
    using ListVolumesOnDiskResponse = ns::ListVolumesOnDiskResponse;                 \
    using MountVolumeRequest = ns::MountVolumeRequest;                               \
    using MountVolumeResponse = ns::MountVolumeResponse;                             \
    using UnmountVolumeRequest = ns::UnmountVolumeRequest;                           \
    using UnmountVolumeResponse = ns::UnmountVolumeResponse;                         \
    using IsVolumeFormattedRequest = ns::IsVolumeFormattedRequest;                   \
    using IsVolumeFormattedResponse = ns::IsVolumeFormattedResponse;                 \
    using FormatVolumeRequest = ns::FormatVolumeRequest;                             \
    using FormatVolumeResponse = ns::FormatVolumeResponse;                           \
    using ResizeVolumeRequest = ns::ResizeVolumeRequest;                             \
    using ResizeVolumeResponse = ns::ResizeVolumeResponse;                           \
    using GetVolumeStatsRequest = ns::GetVolumeStatsRequest;                         \
    using GetVolumeStatsResponse = ns::GetVolumeStatsResponse;                       \
    using GetDiskNumberFromVolumeIDRequest = ns::GetDiskNumberFromVolumeIDRequest;   \
    using GetDiskNumberFromVolumeIDResponse = ns::GetDiskNumberFromVolumeIDResponse; \
    using GetVolumeIDFromTargetPathRequest = ns::GetVolumeIDFromTargetPathRequest;   \
    using GetVolumeIDFromTargetPathResponse = ns::GetVolumeIDFromTargetPathResponse; \
    using WriteVolumeCacheRequest = ns::WriteVolumeCacheRequest;                     \
    using WriteVolumeCacheResponse = ns::WriteVolumeCacheResponse;                   \
  };
CSI_PROXY_VOLUME_MESSAGES(v1)
CSI_PROXY_VOLUME_MESSAGES(v2alpha1)
CSI_PROXY_VOLUME_MESSAGES(v1beta3)
#undef CSI_PROXY_VOLUME_MESSAGES

// The methods v1 and v2alpha1 have in common.
template <typename M>
void AddCommonMethods(sdk::ServiceBuilder& svc, VolumeService& vs) {
  using ListReq = typename M::ListVolumesOnDiskRequest;
  using ListResp = typename M::ListVolumesOnDiskResponse;
  using MountReq = typename M::MountVolumeRequest;
  using UnmountReq = typename M::UnmountVolumeRequest;
  using FormattedReq = typename M::IsVolumeFormattedRequest;
  using FormattedResp = typename M::IsVolumeFormattedResponse;
  using FormatReq = typename M::FormatVolumeRequest;
  using ResizeReq = typename M::ResizeVolumeRequest;
  using StatsReq = typename M::GetVolumeStatsRequest;
  using StatsResp = typename M::GetVolumeStatsResponse;
  using DiskNumberReq = typename M::GetDiskNumberFromVolumeIDRequest;
  using DiskNumberResp = typename M::GetDiskNumberFromVolumeIDResponse;
  using IdFromTargetReq = typename M::GetVolumeIDFromTargetPathRequest;
  using IdFromTargetResp = typename M::GetVolumeIDFromTargetPathResponse;
  using CacheReq = typename M::WriteVolumeCacheRequest;

  svc.template Unary<ListReq, ListResp>("ListVolumesOnDisk", [&vs](const ListReq& req, ListResp& resp, CallContext&) {
    auto ids = vs.ListVolumesOnDisk(req.disk_number(), req.partition_number());
    if (!ids.ok()) return ids.status();
    for (const auto& id : *ids) resp.add_volume_ids(id);
    return Status::Ok();
  });
  svc.template Unary<MountReq, typename M::MountVolumeResponse>(
      "MountVolume",
      [&vs](const MountReq& req, auto&, CallContext&) { return vs.MountVolume(req.volume_id(), req.target_path()); });
  svc.template Unary<UnmountReq, typename M::UnmountVolumeResponse>(
      "UnmountVolume", [&vs](const UnmountReq& req, auto&, CallContext&) {
        return vs.UnmountVolume(req.volume_id(), req.target_path());
      });
  svc.template Unary<FormattedReq, FormattedResp>("IsVolumeFormatted",
                                                  [&vs](const FormattedReq& req, FormattedResp& resp, CallContext&) {
                                                    auto formatted = vs.IsVolumeFormatted(req.volume_id());
                                                    if (formatted.ok()) resp.set_formatted(*formatted);
                                                    return formatted.status();
                                                  });
  svc.template Unary<FormatReq, typename M::FormatVolumeResponse>(
      "FormatVolume", [&vs](const FormatReq& req, auto&, CallContext&) { return vs.FormatVolume(req.volume_id()); });
  svc.template Unary<ResizeReq, typename M::ResizeVolumeResponse>(
      "ResizeVolume",
      [&vs](const ResizeReq& req, auto&, CallContext&) { return vs.ResizeVolume(req.volume_id(), req.size_bytes()); });
  svc.template Unary<StatsReq, StatsResp>("GetVolumeStats", [&vs](const StatsReq& req, StatsResp& resp, CallContext&) {
    auto stats = vs.GetVolumeStats(req.volume_id());
    if (!stats.ok()) return stats.status();
    resp.set_total_bytes(stats->total_bytes);
    resp.set_used_bytes(stats->used_bytes);
    return Status::Ok();
  });
  svc.template Unary<DiskNumberReq, DiskNumberResp>(
      "GetDiskNumberFromVolumeID", [&vs](const DiskNumberReq& req, DiskNumberResp& resp, CallContext&) {
        auto number = vs.GetDiskNumberFromVolumeId(req.volume_id());
        if (number.ok()) resp.set_disk_number(*number);
        return number.status();
      });
  svc.template Unary<IdFromTargetReq, IdFromTargetResp>(
      "GetVolumeIDFromTargetPath", [&vs](const IdFromTargetReq& req, IdFromTargetResp& resp, CallContext&) {
        auto id = vs.GetVolumeIdFromTargetPath(req.target_path());
        if (id.ok()) resp.set_volume_id(*id);
        return id.status();
      });
  svc.template Unary<CacheReq, typename M::WriteVolumeCacheResponse>(
      "WriteVolumeCache",
      [&vs](const CacheReq& req, auto&, CallContext&) { return vs.WriteVolumeCache(req.volume_id()); });
}

// The methods under their older names (v1alpha1 to v1beta3): DismountVolume, VolumeStats, GetVolumeDiskNumber
// and GetVolumeIDFromMount forward to UnmountVolume, GetVolumeStats, GetDiskNumberFromVolumeID and
// GetVolumeIDFromTargetPath.
template <typename Ns>
void AddDismount(sdk::ServiceBuilder& svc, VolumeService& vs) {
  svc.template Unary<typename Ns::DismountVolumeRequest, typename Ns::DismountVolumeResponse>(
      "DismountVolume",
      [&vs](const auto& req, auto&, CallContext&) { return vs.UnmountVolume(req.volume_id(), req.path()); });
}

template <typename Ns, typename Total, typename Used>
void AddRenamedQueries(sdk::ServiceBuilder& svc, VolumeService& vs, Total set_total, Used set_used) {
  svc.template Unary<typename Ns::VolumeStatsRequest, typename Ns::VolumeStatsResponse>(
      "VolumeStats", [&vs, set_total, set_used](const auto& req, auto& resp, CallContext&) {
        auto stats = vs.GetVolumeStats(req.volume_id());
        if (!stats.ok()) return stats.status();
        set_total(resp, stats->total_bytes);
        set_used(resp, stats->used_bytes);
        return Status::Ok();
      });
  svc.template Unary<typename Ns::VolumeDiskNumberRequest, typename Ns::VolumeDiskNumberResponse>(
      "GetVolumeDiskNumber", [&vs](const auto& req, auto& resp, CallContext&) {
        auto number = vs.GetDiskNumberFromVolumeId(req.volume_id());
        if (!number.ok()) return number.status();
        if constexpr (requires { resp.set_disknumber(int64_t{0}); }) {
          resp.set_disknumber(*number);
        } else {
          resp.set_disk_number(*number);
        }
        return Status::Ok();
      });
  svc.template Unary<typename Ns::VolumeIDFromMountRequest, typename Ns::VolumeIDFromMountResponse>(
      "GetVolumeIDFromMount", [&vs](const auto& req, auto& resp, CallContext&) {
        auto id = vs.GetVolumeIdFromTargetPath(req.mount());
        if (id.ok()) resp.set_volume_id(*id);
        return id.status();
      });
}

// v1alpha1, v1beta1 and v1beta2: string disk IDs, `path` and `size` fields.
template <typename Ns>
void AddLegacyMethods(sdk::ServiceBuilder& svc, VolumeService& vs) {
  svc.template Unary<typename Ns::ListVolumesOnDiskRequest, typename Ns::ListVolumesOnDiskResponse>(
      "ListVolumesOnDisk", [&vs](const auto& req, auto& resp, CallContext&) {
        auto number = common::ParseDiskNumber(req.disk_id());
        if (!number.ok()) return number.status();
        auto ids = vs.ListVolumesOnDisk(*number, 0);
        if (!ids.ok()) return ids.status();
        for (const auto& id : *ids) resp.add_volume_ids(id);
        return Status::Ok();
      });
  svc.template Unary<typename Ns::MountVolumeRequest, typename Ns::MountVolumeResponse>(
      "MountVolume",
      [&vs](const auto& req, auto&, CallContext&) { return vs.MountVolume(req.volume_id(), req.path()); });
  AddDismount<Ns>(svc, vs);
  svc.template Unary<typename Ns::IsVolumeFormattedRequest, typename Ns::IsVolumeFormattedResponse>(
      "IsVolumeFormatted", [&vs](const auto& req, auto& resp, CallContext&) {
        auto formatted = vs.IsVolumeFormatted(req.volume_id());
        if (formatted.ok()) resp.set_formatted(*formatted);
        return formatted.status();
      });
  svc.template Unary<typename Ns::FormatVolumeRequest, typename Ns::FormatVolumeResponse>(
      "FormatVolume", [&vs](const auto& req, auto&, CallContext&) { return vs.FormatVolume(req.volume_id()); });
  svc.template Unary<typename Ns::ResizeVolumeRequest, typename Ns::ResizeVolumeResponse>(
      "ResizeVolume",
      [&vs](const auto& req, auto&, CallContext&) { return vs.ResizeVolume(req.volume_id(), req.size()); });
}

#define CSI_PROXY_VOLUME_LEGACY_MESSAGES(ns)                         \
  struct ns##Legacy {                                                \
    using ListVolumesOnDiskRequest = ns::ListVolumesOnDiskRequest;   \
    using ListVolumesOnDiskResponse = ns::ListVolumesOnDiskResponse; \
    using MountVolumeRequest = ns::MountVolumeRequest;               \
    using MountVolumeResponse = ns::MountVolumeResponse;             \
    using DismountVolumeRequest = ns::DismountVolumeRequest;         \
    using DismountVolumeResponse = ns::DismountVolumeResponse;       \
    using IsVolumeFormattedRequest = ns::IsVolumeFormattedRequest;   \
    using IsVolumeFormattedResponse = ns::IsVolumeFormattedResponse; \
    using FormatVolumeRequest = ns::FormatVolumeRequest;             \
    using FormatVolumeResponse = ns::FormatVolumeResponse;           \
    using ResizeVolumeRequest = ns::ResizeVolumeRequest;             \
    using ResizeVolumeResponse = ns::ResizeVolumeResponse;           \
  };
CSI_PROXY_VOLUME_LEGACY_MESSAGES(v1alpha1)
CSI_PROXY_VOLUME_LEGACY_MESSAGES(v1beta1)
CSI_PROXY_VOLUME_LEGACY_MESSAGES(v1beta2)
#undef CSI_PROXY_VOLUME_LEGACY_MESSAGES

#define CSI_PROXY_VOLUME_RENAMED_MESSAGES(ns)                        \
  struct ns##Renamed {                                               \
    using DismountVolumeRequest = ns::DismountVolumeRequest;         \
    using DismountVolumeResponse = ns::DismountVolumeResponse;       \
    using VolumeStatsRequest = ns::VolumeStatsRequest;               \
    using VolumeStatsResponse = ns::VolumeStatsResponse;             \
    using VolumeDiskNumberRequest = ns::VolumeDiskNumberRequest;     \
    using VolumeDiskNumberResponse = ns::VolumeDiskNumberResponse;   \
    using VolumeIDFromMountRequest = ns::VolumeIDFromMountRequest;   \
    using VolumeIDFromMountResponse = ns::VolumeIDFromMountResponse; \
  };
CSI_PROXY_VOLUME_RENAMED_MESSAGES(v1beta1)
CSI_PROXY_VOLUME_RENAMED_MESSAGES(v1beta2)
CSI_PROXY_VOLUME_RENAMED_MESSAGES(v1beta3)
#undef CSI_PROXY_VOLUME_RENAMED_MESSAGES

// The older versions' stats field names: volumeSize/volumeUsedSize (v1beta1, v1beta2), volume_size/... (v1beta3).
constexpr auto kSetVolumeSize = [](auto& resp, int64_t v) { resp.set_volumesize(v); };
constexpr auto kSetVolumeUsedSize = [](auto& resp, int64_t v) { resp.set_volumeusedsize(v); };
constexpr auto kSetVolumeSizeV1beta3 = [](auto& resp, int64_t v) { resp.set_volume_size(v); };
constexpr auto kSetVolumeUsedSizeV1beta3 = [](auto& resp, int64_t v) { resp.set_volume_used_size(v); };

void AddOlderVersions(sdk::Host& host, VolumeService& vs) {
  auto& v1beta3 = host.AddService("v1beta3", "v1beta3.Volume");
  AddCommonMethods<v1beta3Messages>(v1beta3, vs);
  AddDismount<v1beta3Renamed>(v1beta3, vs);
  AddRenamedQueries<v1beta3Renamed>(v1beta3, vs, kSetVolumeSizeV1beta3, kSetVolumeUsedSizeV1beta3);

  auto& v1beta2 = host.AddService("v1beta2", "v1beta2.Volume");
  AddLegacyMethods<v1beta2Legacy>(v1beta2, vs);
  AddRenamedQueries<v1beta2Renamed>(v1beta2, vs, kSetVolumeSize, kSetVolumeUsedSize);
  v1beta2.Unary<v1beta2::WriteVolumeCacheRequest, v1beta2::WriteVolumeCacheResponse>(
      "WriteVolumeCache", [&vs](const auto& req, auto&, CallContext&) { return vs.WriteVolumeCache(req.volume_id()); });

  auto& v1beta1 = host.AddService("v1beta1", "v1beta1.Volume");
  AddLegacyMethods<v1beta1Legacy>(v1beta1, vs);
  AddRenamedQueries<v1beta1Renamed>(v1beta1, vs, kSetVolumeSize, kSetVolumeUsedSize);

  AddLegacyMethods<v1alpha1Legacy>(host.AddService("v1alpha1", "v1alpha1.Volume"), vs);
}

class VolumePlugin : public sdk::Plugin {
 public:
  Status Init(sdk::Host& host) override {
    const sdk::PluginConfig& config = host.config();
    CSI_PROXY_RETURN_IF_ERROR(config.RequireKnownKeys({kDefaultFsTypeKey}));
    LinuxVolumeOptions options;
    auto fs_type = config.GetString(kDefaultFsTypeKey, options.default_fs_type);
    if (!fs_type.ok()) return fs_type.status().WithContext("volume group");
    if (!IsSupportedFilesystem(*fs_type)) {
      return InvalidArgument("volume group: default_fs_type must be ext4, ext3, ext2 or xfs, not '" + *fs_type + "'");
    }
    options.default_fs_type = *fs_type;
    options.scratch_dir = config.state_dir() + "/volume/scratch";

    auto policy = common::PathPolicy::Create(config.kubelet_path(), config.working_dirs());
    if (!policy.ok()) return policy.status().WithContext("volume group ([host] kubelet_path or working_dirs)");
    if (policy->roots().empty()) {
      return FailedPrecondition("volume group: no allowed roots ([host] kubelet_path and working_dirs are empty)");
    }
    backend_ = std::make_unique<LinuxVolumeBackend>(*policy, options);
    service_ = std::make_unique<VolumeService>(*backend_, *policy);

    AddCommonMethods<v1Messages>(host.AddService("v1", "v1.Volume"), *service_);
    auto& v2alpha1 = host.AddService("v2alpha1", "v2alpha1.Volume");
    AddCommonMethods<v2alpha1Messages>(v2alpha1, *service_);
    v2alpha1
        .Unary<v2alpha1::GetClosestVolumeIDFromTargetPathRequest, v2alpha1::GetClosestVolumeIDFromTargetPathResponse>(
            "GetClosestVolumeIDFromTargetPath",
            [vs = service_.get()](const v2alpha1::GetClosestVolumeIDFromTargetPathRequest& req,
                                  v2alpha1::GetClosestVolumeIDFromTargetPathResponse& resp, CallContext&) {
              auto id = vs->GetClosestVolumeIdFromTargetPath(req.target_path());
              if (id.ok()) resp.set_volume_id(*id);
              return id.status();
            });
    AddOlderVersions(host, *service_);

    sdk::LogInfo("volume group ready; FormatVolume creates " + options.default_fs_type + ", allowed roots " +
                 service_->policy().RootsForMessage());
    return Status::Ok();
  }

 private:
  std::unique_ptr<LinuxVolumeBackend> backend_;
  std::unique_ptr<VolumeService> service_;
};

}  // namespace
}  // namespace csi_proxy::volume

CSI_PROXY_PLUGIN(csi_proxy::volume::VolumePlugin, "volume", "0.1.0")

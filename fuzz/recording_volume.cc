// The volume group's recording OS layer for fuzzing: one formatted volume on disk 1, nothing mounted or formatted
// for real.
#include "volume_backend.h"

namespace csi_proxy::volume {
namespace {

constexpr const char* kVolume = "/dev/disk/by-uuid/fuzz";

class RecordingVolumeBackend : public VolumeBackend {
 public:
  // The one volume is known; every call on a resolved volume succeeds without touching the machine.
  StatusOr<ResolvedVolume> ResolveVolume(const std::string& volume_id) override {
    if (volume_id != kVolume) return NotFound("volume '" + volume_id + "' does not exist");
    return ResolvedVolume{kVolume, {}};
  }
  StatusOr<std::vector<std::string>> ListVolumesOnDisk(uint32_t disk_number, uint32_t) override {
    if (disk_number != 1) return NotFound("disk " + std::to_string(disk_number) + " does not exist");
    return std::vector<std::string>{kVolume};
  }
  Status MountVolume(const ResolvedVolume&, const common::ConfinedPath&) override { return Status::Ok(); }
  Status UnmountVolume(const ResolvedVolume&, const common::ConfinedPath&) override { return Status::Ok(); }
  StatusOr<bool> IsVolumeFormatted(const ResolvedVolume&) override { return true; }
  Status FormatVolume(const ResolvedVolume&, const FormatOptions&) override { return Status::Ok(); }
  std::string DefaultFilesystem() const override { return "ext4"; }
  Status ResizeVolume(const ResolvedVolume&, int64_t) override { return Status::Ok(); }
  StatusOr<VolumeStats> GetVolumeStats(const ResolvedVolume&) override {
    return VolumeStats{int64_t{1} << 30, int64_t{1} << 20};
  }
  StatusOr<uint32_t> GetDiskNumber(const ResolvedVolume&) override { return 1u; }
  StatusOr<std::string> GetVolumeIdFromTargetPath(const common::ConfinedPath&) override { return std::string(kVolume); }
  StatusOr<std::string> GetClosestVolumeIdFromTargetPath(const common::ConfinedPath&) override {
    return std::string(kVolume);
  }
  Status WriteVolumeCache(const ResolvedVolume&) override { return Status::Ok(); }
};

}  // namespace

const std::vector<std::string_view>& SupportedFilesystems() {
  static const std::vector<std::string_view> kFilesystems = {"ext4", "xfs"};
  return kFilesystems;
}

std::unique_ptr<VolumeBackend> MakeVolumeBackend(common::PathPolicy, const VolumeBackendOptions&) {
  return std::make_unique<RecordingVolumeBackend>();
}

}  // namespace csi_proxy::volume

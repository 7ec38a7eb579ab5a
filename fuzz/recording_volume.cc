// The volume group's recording OS layer for fuzzing: one formatted volume on disk 1, nothing mounted or formatted
// for real.
#include "volume_backend.h"

namespace csi_proxy::volume {
namespace {

constexpr const char* kVolume = "/dev/disk/by-uuid/fuzz";

class RecordingVolumeBackend : public VolumeBackend {
 public:
  StatusOr<std::string> CanonicalVolumeId(const std::string& volume_id) override {
    CSI_PROXY_RETURN_IF_ERROR(Known(volume_id));
    return std::string(kVolume);
  }
  StatusOr<std::vector<std::string>> ListVolumesOnDisk(uint32_t disk_number, uint32_t) override {
    if (disk_number != 1) return NotFound("disk " + std::to_string(disk_number) + " does not exist");
    return std::vector<std::string>{kVolume};
  }
  Status MountVolume(const std::string& volume_id, const common::ConfinedPath&) override { return Known(volume_id); }
  Status UnmountVolume(const std::string& volume_id, const common::ConfinedPath&) override { return Known(volume_id); }
  StatusOr<bool> IsVolumeFormatted(const std::string& volume_id) override {
    CSI_PROXY_RETURN_IF_ERROR(Known(volume_id));
    return true;
  }
  Status FormatVolume(const std::string& volume_id) override { return Known(volume_id); }
  Status ResizeVolume(const std::string& volume_id, int64_t) override { return Known(volume_id); }
  StatusOr<VolumeStats> GetVolumeStats(const std::string& volume_id) override {
    CSI_PROXY_RETURN_IF_ERROR(Known(volume_id));
    return VolumeStats{int64_t{1} << 30, int64_t{1} << 20};
  }
  StatusOr<uint32_t> GetDiskNumber(const std::string& volume_id) override {
    CSI_PROXY_RETURN_IF_ERROR(Known(volume_id));
    return 1u;
  }
  StatusOr<std::string> GetVolumeIdFromTargetPath(const common::ConfinedPath&) override { return std::string(kVolume); }
  StatusOr<std::string> GetClosestVolumeIdFromTargetPath(const common::ConfinedPath&) override {
    return std::string(kVolume);
  }
  Status WriteVolumeCache(const std::string& volume_id) override { return Known(volume_id); }

 private:
  static Status Known(const std::string& volume_id) {
    return volume_id == kVolume ? Status::Ok() : NotFound("volume '" + volume_id + "' does not exist");
  }
};

}  // namespace

bool IsSupportedFilesystem(const std::string& fs_type) { return fs_type == "ext4" || fs_type == "xfs"; }

std::unique_ptr<VolumeBackend> MakeVolumeBackend(common::PathPolicy, const VolumeBackendOptions&) {
  return std::make_unique<RecordingVolumeBackend>();
}

}  // namespace csi_proxy::volume

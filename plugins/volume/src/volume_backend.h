// The volume group's OS interface, in version-neutral types. Volume IDs reaching the backend are canonical
// (CanonicalVolumeId); target paths have passed the path policy's lexical check. The Linux implementation is
// volume_backend_linux.*.
#pragma once

#include <algorithm>
#include <any>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "csi_proxy/status.hpp"
#include "format_options.h"
#include "path_policy.h"

namespace csi_proxy::volume {

struct VolumeStats {
  int64_t total_bytes = 0;
  int64_t used_bytes = 0;
};

// A volume ID resolved once per request: its canonical form, and the backend's own description of the device
// (on Linux a common::BlockDevice), which the service passes back to the backend's methods so that they do
// not look the ID up again. `device` is empty for an ID that names nothing any more (UnmountVolume only).
struct ResolvedVolume {
  std::string id;
  std::any device;
};

class VolumeBackend {
 public:
  virtual ~VolumeBackend() = default;

  // Resolves a volume ID to its canonical form (the device node the kernel names it by) and its device.
  // INVALID_ARGUMENT for IDs that cannot name a volume, NOT_FOUND for IDs that name nothing.
  virtual StatusOr<ResolvedVolume> ResolveVolume(const std::string& volume_id) = 0;

  // Volumes on a disk: its partitions (all, or only `partition_number` when it is not 0), or the whole disk when
  // it holds a filesystem without a partition table. NOT_FOUND for an unknown disk.
  virtual StatusOr<std::vector<std::string>> ListVolumesOnDisk(uint32_t disk_number, uint32_t partition_number) = 0;
  virtual Status MountVolume(const ResolvedVolume& volume, const common::ConfinedPath& target) = 0;
  virtual Status UnmountVolume(const ResolvedVolume& volume, const common::ConfinedPath& target) = 0;
  virtual StatusOr<bool> IsVolumeFormatted(const ResolvedVolume& volume) = 0;
  // Creates `options.fs_type` (DefaultFilesystem() when empty) with `options.mkfs_options`, which the service
  // has checked (format_options.h). A volume that already holds that filesystem is left alone.
  virtual Status FormatVolume(const ResolvedVolume& volume, const FormatOptions& options) = 0;
  // The filesystem FormatVolume creates when a request names none (the group's default_fs_type).
  virtual std::string DefaultFilesystem() const = 0;
  // Grows the partition to `size_bytes` (0: as far as the disk allows) and the filesystem to the partition.
  virtual Status ResizeVolume(const ResolvedVolume& volume, int64_t size_bytes) = 0;
  virtual StatusOr<VolumeStats> GetVolumeStats(const ResolvedVolume& volume) = 0;
  virtual StatusOr<uint32_t> GetDiskNumber(const ResolvedVolume& volume) = 0;
  // The volume mounted exactly at `target` (after following symlinks).
  virtual StatusOr<std::string> GetVolumeIdFromTargetPath(const common::ConfinedPath& target) = 0;
  // The volume holding `target`: its own mount if it is a block volume, else the nearest enclosing one.
  virtual StatusOr<std::string> GetClosestVolumeIdFromTargetPath(const common::ConfinedPath& target) = 0;
  virtual Status WriteVolumeCache(const ResolvedVolume& volume) = 0;
};

// Filesystems FormatVolume can create and ResizeVolume can grow on this platform, the first one the default.
const std::vector<std::string_view>& SupportedFilesystems();
inline bool IsSupportedFilesystem(std::string_view fs_type) {
  const auto& all = SupportedFilesystems();
  return std::find(all.begin(), all.end(), fs_type) != all.end();
}

// What the group's configuration sets for the platform's backend.
struct VolumeBackendOptions {
  std::string default_fs_type = "ext4";  // what FormatVolume creates; IsSupportedFilesystem
  std::string scratch_dir;               // private temporary mount points
  // [host] state_dir: the disk group's offline records are read from <state_dir>/disk/offline, and the mount
  // points MountVolume made are recorded in <state_dir>/volume/mounts (for the filesystem group's forced Rmdir).
  std::string state_dir;
  bool mount_nosuid_nodev = true;  // MountVolume mounts with nosuid,nodev
};

// The platform's backend (on Linux defined in volume_backend_linux.cc). `policy` confines target paths.
std::unique_ptr<VolumeBackend> MakeVolumeBackend(common::PathPolicy policy, const VolumeBackendOptions& options);

}  // namespace csi_proxy::volume

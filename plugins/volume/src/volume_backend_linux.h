// The volume group on Linux: libblkid to see filesystems; mkfs, e2fsck, resize2fs and xfs_growfs run with an argv;
// libfdisk and BLKPG to grow partitions; the kernel's mount API on directories opened under the path policy.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "block_device_scan_linux.h"
#include "block_inventory_linux.h"
#include "disk_offline_linux.h"
#include "mount_table_linux.h"
#include "path_policy.h"
#include "unique_fd_linux.h"
#include "volume_backend.h"
#include "volume_mounts_linux.h"

namespace csi_proxy::volume {

struct LinuxVolumeOptions {
  std::string default_fs_type = "ext4";                           // what FormatVolume creates (ext4, ext3, ext2 or xfs)
  std::string scratch_dir = "/var/lib/csi-proxy/volume/scratch";  // private temporary mount points
  bool mount_nosuid_nodev = true;  // MountVolume mounts with nosuid,nodev (the group key mount_nosuid_nodev)
  // [host] state_dir: offline disks are read from its disk/offline records, mount points made are recorded in
  // volume/mounts. Empty: no disk is offline but SCSI ones, and no mount point is recorded.
  std::string state_dir;
  common::BlockDeviceRoots roots;
  common::BlockInventoryOptions inventory;
};

class LinuxVolumeBackend final : public VolumeBackend {
 public:
  LinuxVolumeBackend(common::PathPolicy policy, LinuxVolumeOptions options);

  StatusOr<ResolvedVolume> ResolveVolume(const std::string& volume_id) override;
  StatusOr<std::vector<std::string>> ListVolumesOnDisk(uint32_t disk_number, uint32_t partition_number) override;
  Status MountVolume(const ResolvedVolume& resolved, const common::ConfinedPath& target) override;
  Status UnmountVolume(const ResolvedVolume& resolved, const common::ConfinedPath& target) override;
  StatusOr<bool> IsVolumeFormatted(const ResolvedVolume& resolved) override;
  Status FormatVolume(const ResolvedVolume& resolved, const FormatOptions& options) override;
  std::string DefaultFilesystem() const override { return options_.default_fs_type; }
  Status ResizeVolume(const ResolvedVolume& resolved, int64_t size_bytes) override;
  StatusOr<VolumeStats> GetVolumeStats(const ResolvedVolume& resolved) override;
  StatusOr<uint32_t> GetDiskNumber(const ResolvedVolume& resolved) override;
  StatusOr<std::string> GetVolumeIdFromTargetPath(const common::ConfinedPath& target) override;
  StatusOr<std::string> GetClosestVolumeIdFromTargetPath(const common::ConfinedPath& target) override;
  Status WriteVolumeCache(const ResolvedVolume& resolved) override;

 private:
  // The device of a resolved volume; NOT_FOUND when it named nothing.
  static StatusOr<common::BlockDevice> Device(const ResolvedVolume& resolved);
  StatusOr<common::UniqueFd> OpenTarget(const common::ConfinedPath& target) const;
  // Grows the partition to `size_bytes` (0: the maximum); calls `before_write` with the new size before it
  // changes anything. `partition_bytes` is the partition's size afterwards (also when nothing changed).
  Status GrowPartition(const common::BlockDevice& volume, int64_t size_bytes,
                       const std::function<Status(uint64_t)>& before_write, uint64_t& partition_bytes);
  Status GrowFilesystem(const common::BlockDevice& volume, const std::string& fs_type);
  // The mounts of `volume` in `table` when each is one MountVolume made (the whole filesystem at a mount point it
  // recorded), so that FormatVolume may format it in place; FAILED_PRECONDITION naming any other mount.
  StatusOr<std::vector<common::MountEntry>> MountsToFormatUnder(const common::BlockDevice& volume,
                                                                const std::vector<common::MountEntry>& table) const;
  // FormatVolume of a volume mounted at `mounts` (MountsToFormatUnder): unmounted, formatted with `mkfs`, and
  // mounted again at each mount point as it was; a busy mount point refuses it, and what was unmounted is
  // mounted again.
  Status FormatMountedVolume(const common::BlockDevice& volume, const std::string& fs_type, const FormatOptions& format,
                             const std::string& mkfs, const std::vector<common::MountEntry>& mounts);
  // Mounts `volume` (holding `fs_type`) at `mount_point` (a real path under the roots) with `attributes`.
  Status MountAgain(const common::BlockDevice& volume, const std::string& fs_type, const std::string& mount_point,
                    unsigned int attributes);
  // Unmounts `mount` (never lazily; FAILED_PRECONDITION `when_busy` when busy) by its real path, looked up under the
  // policy from its parent. `shown` names it in messages; `attributes`, if given, receives its mount attributes
  // first.
  Status UnmountMountPoint(const common::MountEntry& mount, const std::string& shown, const std::string& when_busy,
                           unsigned int* attributes);
  // FAILED_PRECONDITION for a volume the node uses itself: mounted outside the allowed roots, swap, held.
  Status RefuseHostOwnedVolume(const common::BlockDevice& volume) const;
  // FAILED_PRECONDITION for a volume another process holds open exclusively or for writing (see README).
  Status RefuseOpenVolume(const common::BlockDevice& volume) const;

  common::PathPolicy policy_;
  LinuxVolumeOptions options_;
  common::BlockDevices devices_;      // sysfs read directly: what changes read (holders, swap)
  common::BlockInventory inventory_;  // volume IDs, disks and their partitions
  common::OfflineDisks offline_;      // the disk group's offline state, read only
  common::VolumeMounts mounts_;       // the mount points MountVolume made (for the filesystem group's Rmdir)
};

}  // namespace csi_proxy::volume

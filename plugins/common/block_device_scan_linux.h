// The block devices the Linux kernel lists, read from sysfs: whole disks and partitions, their names, sizes and
// disk numbers, volume IDs, SCSI details, and what uses a device. Shared by the disk, volume and iSCSI groups.
//
// Conventions (see docs/deviations.md and the disk and volume groups' READMEs):
//   - a disk is a whole disk under /sys/block with a non-zero size; its number is the kernel's diskseq
//     (/sys/block/<dev>/diskseq), unique per boot and never reused;
//   - a volume ID is the canonical device node of a partition (/dev/loop3p1) or, for a filesystem on the whole
//     disk, of the disk itself (/dev/loop3).
// What is on a device is block_probe_linux.h; changing a disk's partitions is partition_table_linux.h.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "csi_proxy/status.hpp"
#include "device_naming.h"
#include "mount_table_linux.h"

namespace csi_proxy::common {

// Where sysfs and the device nodes live. Tests point these at a fabricated tree to cover hardware this machine
// lacks (SCSI); production code uses the defaults.
struct BlockDeviceRoots {
  std::string sys = "/sys";
  std::string dev = "/dev";
};

// A whole disk or a partition.
struct BlockDevice {
  std::string name;  // kernel name: "loop3", "loop3p1", "sda", "nvme0n1p2"
  std::string path;  // device node: "/dev/loop3p1"
  dev_t devno = 0;   // major:minor
  bool is_partition = false;
  uint32_t partition_number = 0;  // 1-based; 0 for a whole disk
  std::string disk_name;          // the whole disk: "loop3" (equals `name` for a disk)
  uint64_t diskseq = 0;           // the whole disk's diskseq (its disk number)
  uint64_t start_bytes = 0;       // offset of a partition on its disk; 0 for a disk
  uint64_t size_bytes = 0;
};

// The disk number of a device's disk, as the API carries it (uint32): the diskseq. nullopt when the kernel gave
// none, or one beyond uint32 (after four billion device attachments in one boot), which cannot be named.
std::optional<uint32_t> DiskNumberOf(const BlockDevice& device);

// "8:17" (a sysfs dev attribute) -> the device number; nullopt if it is not one.
std::optional<dev_t> ParseDevno(std::string_view text);

class BlockDevices {
 public:
  explicit BlockDevices(BlockDeviceRoots roots = {});

  const BlockDeviceRoots& roots() const { return roots_; }

  // Whole disks with a diskseq and a non-zero size, sorted by diskseq.
  StatusOr<std::vector<BlockDevice>> ListDisks() const;

  // The disk whose diskseq is `number`; NOT_FOUND otherwise.
  StatusOr<BlockDevice> DiskByNumber(uint64_t number) const;

  // A whole disk or partition by kernel name ("sdb", "loop3p1"); NOT_FOUND if the kernel lists none.
  StatusOr<BlockDevice> DeviceByName(std::string_view name) const;

  // The whole disk of that kernel name ("sdb"); FAILED_PRECONDITION if it is a partition. The iSCSI group maps
  // a session's disks (/sys/class/iscsi_session/.../block/sdX) to disk numbers with this.
  StatusOr<BlockDevice> DiskByName(std::string_view name) const;

  // The block device with that major:minor; NOT_FOUND if the kernel lists none.
  StatusOr<BlockDevice> DeviceByDevno(dev_t devno) const;

  // The block device a mount is of: by its device number, else by a /dev source path (btrfs reports an
  // anonymous device number). NOT_FOUND for filesystems without one (tmpfs, overlay, nfs).
  StatusOr<BlockDevice> DeviceOfMount(const MountEntry& mount) const;

  // Turns a volume ID into the device it names. The ID must be an absolute path under the device root that
  // resolves (symlinks such as /dev/disk/by-uuid/... are followed) to a block device node the kernel lists.
  // INVALID_ARGUMENT for anything else that exists (a regular file, a path outside /dev, "-1", ""),
  // NOT_FOUND when nothing exists there. The result's `path` is the canonical volume ID.
  StatusOr<BlockDevice> ResolveVolumeId(std::string_view volume_id) const;

  // The partitions the kernel currently knows on `disk`, by partition number.
  StatusOr<std::vector<BlockDevice>> PartitionsOf(const BlockDevice& disk) const;

  // The whole disk a device belongs to (itself for a disk).
  StatusOr<BlockDevice> DiskOf(const BlockDevice& device) const;

  // Waits until the kernel lists partition `number` of `disk` and its device node exists (created with mknod
  // when /dev is not a devtmpfs that does it). DEADLINE_EXCEEDED after `timeout`.
  StatusOr<BlockDevice> WaitForPartition(const BlockDevice& disk, uint32_t number,
                                         std::chrono::milliseconds timeout) const;

  // SCSI address of a disk; nullopt when it is not a SCSI device (loop, virtio, nvme, ...).
  std::optional<ScsiAddress> ScsiAddressOf(const BlockDevice& disk) const;

  // Page 0x83 and serial of a disk; empty strings where the device has none.
  DiskIdentifiers IdentifiersOf(const BlockDevice& disk) const;

  // The sysfs file with the SCSI device state ("running", "offline", ...); nullopt for devices that have none.
  std::optional<std::string> ScsiStatePath(const BlockDevice& disk) const;

  // Kernel names of the devices stacked on this one (device-mapper, md), from sysfs holders/.
  std::vector<std::string> HoldersOf(const BlockDevice& device) const;

  // Why the device, or for a disk any of its partitions, is in use: "mounted at /x", "held by dm-0",
  // "in use as swap". nullopt when nothing uses it. `mounts` is a fresh ReadMountTable().
  std::optional<std::string> DescribeUse(const BlockDevice& device, const std::vector<MountEntry>& mounts) const;

  // sysfs directory of a device: /sys/class/block/<name>.
  std::string SysfsDir(std::string_view name) const;

 private:
  StatusOr<BlockDevice> Describe(const std::string& name) const;
  bool DevIsDevtmpfs() const;
  // /sys/block/<disk>/device when it is a SCSI device; nullopt otherwise.
  std::optional<std::string> ScsiDeviceDir(const BlockDevice& disk) const;

  BlockDeviceRoots roots_;
};

// The block device node a volume ID leads to, by BlockDevices::ResolveVolumeId's rules (which it checks, but for
// the kernel listing the device).
struct DeviceNode {
  std::string path;  // the resolved node, symlinks followed
  dev_t devno = 0;
};
StatusOr<DeviceNode> ResolveDeviceNode(const BlockDeviceRoots& roots, std::string_view volume_id);
// Keeps the kernel's own node name as `device.path` when that node is this device; else the resolved one.
void PreferKernelNode(BlockDevice& device, const DeviceNode& node);

// Mounts whose source is this device: by device number, or by source path for filesystems that report an
// anonymous device number (btrfs).
std::vector<MountEntry> MountsOfDevice(const std::vector<MountEntry>& mounts, const BlockDevice& device);
bool IsMountOf(const MountEntry& mount, const BlockDevice& device);

// Reads a small sysfs/proc attribute without its trailing newline.
StatusOr<std::string> ReadAttribute(const std::string& path);

}  // namespace csi_proxy::common

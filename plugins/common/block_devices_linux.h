// Block devices as the Linux kernel lists them, shared by the disk, volume and iSCSI groups.
//
// Conventions (see docs and ARCHITECTURE.md):
//   - a disk is a whole disk under /sys/block with a non-zero size; its number is the kernel's diskseq
//     (/sys/block/<dev>/diskseq), unique per boot and never reused;
//   - a volume ID is the canonical device node of a partition (/dev/loop3p1) or, for a filesystem on the whole
//     disk, of the disk itself (/dev/loop3).
// Everything here reads sysfs, libblkid, libmount and a few ioctls; nothing runs a program.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "confined_open_linux.h"  // UniqueFd
#include "csi_proxy/status.hpp"
#include "path_policy.h"  // QuotePath

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

// SCSI host:channel:target:lun, from the name of /sys/block/<dev>/device.
struct ScsiAddress {
  uint32_t host = 0;
  uint32_t channel = 0;
  uint32_t target = 0;
  uint64_t lun = 0;
};

struct DiskIdentifiers {
  std::string page83;         // per SelectPage83Identifier; "" when the device has no VPD page 0x83
  std::string serial_number;  // untrimmed, as the device reports it; "" when it has none
};

// What libblkid recognises on a device.
struct Signatures {
  std::string fs_type;  // TYPE: "ext4", "xfs", "LVM2_member", "swap", ...; "" when there is none
  std::string usage;    // USAGE: "filesystem", "raid", "crypto", "other"
  std::string uuid;
  std::string label;
  std::string pt_type;      // PTTYPE: "gpt", "dos"; "" without a partition table
  bool ambivalent = false;  // several conflicting signatures: treat the device as holding data
  bool Empty() const { return fs_type.empty() && pt_type.empty() && !ambivalent; }
};

// One entry of a disk's partition table as libblkid reads it.
struct PartitionEntry {
  uint32_t number = 0;
  std::string type;  // GPT type GUID (lowercase) or a dos type as "0x83"
  bool is_extended = false;
  uint64_t start_bytes = 0;
  uint64_t size_bytes = 0;
};

// One line of /proc/self/mountinfo.
struct MountEntry {
  int id = 0;
  int parent_id = 0;
  dev_t devno = 0;
  std::string root;    // the path inside the filesystem that is mounted
  std::string target;  // the mount point, unescaped
  std::string source;
  std::string fs_type;
};

// ---- Pure parsing (no I/O) -------------------------------------------------------------------------------

// "H:C:T:L" (the name of a SCSI device in sysfs) -> address; nullopt if it is not one.
std::optional<ScsiAddress> ParseScsiAddress(std::string_view text);

// Upstream's page 0x83 rule: among the designation descriptors of a VPD page 0x83, the first whose association is
// "addressed logical unit" (0) and whose code set is binary (1, returned as lowercase hex) or ASCII (2, returned
// as the raw bytes) wins, whatever its designator type. "" when none qualifies or the page is malformed.
std::string SelectPage83Identifier(std::string_view vpd_page);

// The product serial number of a VPD page 0x80 (bytes 4 .. 4+length), untrimmed. "" when malformed.
std::string ParseVpdSerial(std::string_view vpd_page);

// A disk number written as decimal text, as older API versions carry it ("7"). INVALID_ARGUMENT for anything
// else: empty, signs, spaces, other digits, values beyond uint32.
StatusOr<uint32_t> ParseDiskNumber(std::string_view text);

// The disk number of a device's disk, as the API carries it (uint32): the diskseq. nullopt when the kernel gave
// none, or one beyond uint32 (after four billion device attachments in one boot), which cannot be named.
std::optional<uint32_t> DiskNumberOf(const BlockDevice& device);

// ---- The kernel's block devices --------------------------------------------------------------------------

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

  // Brings the kernel's partitions of `disk` in line with its partition table, as `partx -u` does, through
  // BLKPG only (no BLKRRPART, which drops and re-creates every partition device, and finds nothing on kernels
  // built without partition-table parsers): adds missing partitions and resizes changed ones; with
  // `remove_vanished`, also removes partitions the table no longer has, if nothing uses them. `disk_fd` is an
  // open descriptor of the disk (the caller holds its lock).
  Status SyncKernelPartitions(const BlockDevice& disk, int disk_fd, bool remove_vanished) const;

  // True when the kernel's partitions of `disk` match its partition table.
  bool KernelPartitionsMatchTable(const BlockDevice& disk) const;

  // sysfs directory of a device: /sys/class/block/<name>.
  std::string SysfsDir(std::string_view name) const;

 private:
  StatusOr<BlockDevice> Describe(const std::string& name) const;
  bool DevIsDevtmpfs() const;
  // /sys/block/<disk>/device when it is a SCSI device; nullopt otherwise.
  std::optional<std::string> ScsiDeviceDir(const BlockDevice& disk) const;

  BlockDeviceRoots roots_;
};

// ---- Signatures, partition tables, mounts ------------------------------------------------------------------

// libblkid low-level probe of a device (filesystems, RAID/LVM members, swap, partition tables).
StatusOr<Signatures> ProbeSignatures(const std::string& device_path);

// What a probe found, for messages: "a filesystem of type ext4 (UUID ...)", "a signature of type LVM2_member",
// "several conflicting signatures", "a partition table of type gpt" or "nothing".
std::string DescribeSignatures(const Signatures& sig);

// The partition table entries of a disk as libblkid reads them from the disk (not the kernel's view).
StatusOr<std::vector<PartitionEntry>> ReadPartitionEntries(const std::string& disk_path);

// GPT type GUID of the Microsoft Reserved partition, which upstream never reports as a volume.
inline constexpr std::string_view kMicrosoftReservedGuid = "e3c9e316-0b5c-4db8-817d-f92df00215ae";

// /proc/self/mountinfo through libmount.
StatusOr<std::vector<MountEntry>> ReadMountTable();

// Mounts whose source is this device: by device number, or by source path for filesystems that report an
// anonymous device number (btrfs).
std::vector<MountEntry> MountsOfDevice(const std::vector<MountEntry>& mounts, const BlockDevice& device);
bool IsMountOf(const MountEntry& mount, const BlockDevice& device);

// ---- File descriptors, locks, kernel partition table updates -------------------------------------------------

// Opens a whole disk and takes the BSD lock that systemd's block-device locking convention defines
// (https://systemd.io/BLOCK_DEVICE_LOCKING/): exclusive while we change the partition table or write a
// filesystem, so udev (if it runs), other tools and the other API groups in this process wait for us.
// `open_flags` are added to O_CLOEXEC (e.g. O_RDWR | O_EXCL). UNAVAILABLE if another holder keeps the lock
// past `timeout`; FAILED_PRECONDITION if O_EXCL finds the device in use.
StatusOr<UniqueFd> OpenAndLockDisk(const std::string& disk_path, int open_flags, bool exclusive,
                                   std::chrono::milliseconds timeout = std::chrono::seconds(30));

// BLKRRPART: the kernel re-reads the partition table. Fails with EBUSY while a partition is in use.
Status RereadPartitionTable(int disk_fd);

// BLKPG: add or resize one partition in the kernel's view without touching the others.
Status KernelAddPartition(int disk_fd, uint32_t number, uint64_t start_bytes, uint64_t size_bytes);
Status KernelResizePartition(int disk_fd, uint32_t number, uint64_t start_bytes, uint64_t size_bytes);
Status KernelDeletePartition(int disk_fd, uint32_t number);

// Reads a small sysfs/proc attribute without its trailing newline.
StatusOr<std::string> ReadAttribute(const std::string& path);

// strerror(errno) with a prefix: "open /dev/loop3: Device or resource busy".
std::string ErrnoMessage(std::string_view what, int err);

}  // namespace csi_proxy::common

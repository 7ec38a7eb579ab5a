// Whether a disk is offline, for every group that must not use an offline disk: the disk group (SetDiskState,
// GetDiskState, PartitionDisk) and the volume group (FormatVolume, MountVolume, ResizeVolume).
//
// Upstream's contract: an offline disk is not used until it is brought online. SCSI disks have the kernel's own
// state (device/state: "offline" makes the kernel refuse their I/O). Other disks (NVMe, virtio, loop, ...) have
// none, so the disk group keeps theirs: a record under <state_dir>/disk/offline (state_records_linux.h), which the
// volume group, a separate library, reads too, and which survives a restart of the proxy. A record is keyed by
// what identifies the disk beyond this boot (DiskStableKey), not by its diskseq, which changes when a disk is
// attached again.
#pragma once

#include <optional>
#include <string>

#include "block_device_scan_linux.h"
#include "block_inventory_linux.h"
#include "csi_proxy/status.hpp"
#include "state_records_linux.h"

namespace csi_proxy::common {

// SCSI device states in which the disk serves I/O (or will again without an administrator).
bool IsOnlineScsiState(const std::string& state);

// What identifies a whole disk beyond this boot, in order: the kernel's `wwid` (NVMe namespaces: "eui.<hex>",
// "uuid.<uuid>", "nvme.<vendor>-<serial>-<model>-<nsid>"), its page 0x83 identifier, its serial number, a loop
// device's backing file (and offset); as a last resort the diskseq with this boot's id, which holds until the
// next reboot. "wwid:eui.0025388b91c1a4f0", "loop:/var/lib/images/disk.img", ...
std::string DiskStableKey(const BlockDeviceRoots& roots, const BlockEntry& disk);

class OfflineDisks {
 public:
  // Records in <state_dir>/disk/offline. An empty `state_dir` keeps no records: only SCSI disks can be offline.
  OfflineDisks(const std::string& state_dir, BlockDeviceRoots roots);

  static std::string RecordsDir(const std::string& state_dir) { return state_dir + "/disk/offline"; }

  // nullopt while the disk is online; otherwise how it is offline, for messages: "offline (its SCSI device
  // state is 'offline')" or "offline (taken offline with SetDiskState)".
  StatusOr<std::optional<std::string>> OfflineState(const BlockEntry& disk) const;

  // Whether the disk's offline state is kept here (it has no kernel state), i.e. Mark/Clear apply to it.
  bool KeepsStateOf(const BlockEntry& disk) const { return !disk.has_scsi_state; }
  bool enabled() const { return !state_dir_.empty(); }

  // Records the disk as offline (or removes that record). Only for disks KeepsStateOf.
  Status MarkOffline(const BlockEntry& disk) const;
  Status MarkOnline(const BlockEntry& disk) const;

 private:
  std::string state_dir_;
  BlockDeviceRoots roots_;
  StateRecords records_;
};

// FAILED_PRECONDITION "/dev/loop3p1 is on disk 12 (/dev/loop3), which is offline (...); bring the disk online with
// SetDiskState before <action>" when the disk of `device` is offline; OK otherwise.
Status RefuseOfflineDisk(const OfflineDisks& offline, BlockInventory& inventory, const BlockDevice& device,
                         const std::string& action);

}  // namespace csi_proxy::common

// The block devices of the node kept in memory: disks and partitions with their numbers, sizes, SCSI addresses
// and identifiers, read once from sysfs and then kept current from the kernel's own uevents
// (NETLINK_KOBJECT_UEVENT, the kernel's multicast group; no udev is needed). The metadata calls of the disk and
// volume groups answer from here instead of walking sysfs on every call.
//
// Read-your-writes. Every query first brings the inventory up to date:
//   1. it reads the kernel's uevent counter (/sys/kernel/uevent_seqnum, kept open);
//   2. it drains the event socket without blocking and re-reads (from sysfs, relative to an open directory) every
//      block device an event named;
//   3. if the events it has seen do not reach the counter read in 1 (events lost: ENOBUFS on recv, or emitted
//      where this socket does not hear them, such as another network namespace), it rescans everything.
// The kernel emits the uevent of a loop attach, detach and capacity change and of a BLKPG partition add or
// delete before the ioctl returns, so a query that starts after such an operation returned sees it. A full
// rescan also runs at an interval (a safety net) and whenever the event socket cannot be used.
//
// What is not kept: what a device holds (filesystems: mkfs emits no event, so block_probe_linux.h probes per
// call), holders and mounts (DescribeUse in block_device_scan_linux.h reads them when a change needs them), and
// a SCSI disk's state (read per call, relative to the open sysfs directory). A partition resized with BLKPG emits
// no event: whoever resizes calls Invalidate.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "block_device_scan_linux.h"
#include "csi_proxy/status.hpp"
#include "device_naming.h"
#include "unique_fd_linux.h"

namespace csi_proxy::common {

struct BlockInventoryOptions {
  // A full rescan at least this often, whatever the events say.
  std::chrono::milliseconds rescan_interval = std::chrono::seconds(60);
  // SO_RCVBUFFORCE of the event socket (0: 4 MiB). Tests make it tiny to lose events on purpose.
  int receive_buffer_bytes = 0;
  // Listen to uevents. Off (and always off for a sysfs other than /sys, such as a test's fabricated tree):
  // every query rescans.
  bool events = true;
};

// One block device as the inventory knows it.
struct BlockEntry {
  BlockDevice device;
  // Whole disks only:
  std::optional<ScsiAddress> scsi_address;  // nullopt: not a SCSI device
  DiskIdentifiers ids;
  bool has_scsi_state = false;  // device/state exists (SCSI disks can be taken offline)

  bool operator==(const BlockEntry& other) const;
};

class BlockInventory {
 public:
  explicit BlockInventory(BlockDeviceRoots roots = {}, BlockInventoryOptions options = {});
  ~BlockInventory();
  BlockInventory(const BlockInventory&) = delete;
  BlockInventory& operator=(const BlockInventory&) = delete;

  const BlockDeviceRoots& roots() const { return roots_; }

  // Whole disks with a diskseq and a non-zero size, sorted by diskseq (BlockDevices::ListDisks' rule). The list is
  // built once per change of the devices and shared by every query until the next one: an answer never copies it.
  using DiskList = std::shared_ptr<const std::vector<BlockEntry>>;
  StatusOr<DiskList> ListDisks();
  // The disk whose diskseq is `number`; NOT_FOUND otherwise.
  StatusOr<BlockEntry> DiskByNumber(uint64_t number);
  // The partitions the kernel currently lists on `disk`, by partition number.
  StatusOr<std::vector<BlockDevice>> PartitionsOf(const BlockDevice& disk);
  // BlockDevices::ResolveVolumeId's rules, with the device looked up here.
  StatusOr<BlockDevice> ResolveVolumeId(std::string_view volume_id);
  // The SCSI state of a disk ("running", "offline", ...), read now; nullopt for a disk without one.
  StatusOr<std::optional<std::string>> ReadScsiState(const BlockEntry& disk);

  // Re-reads this device from sysfs at the next query (after a change that emits no uevent).
  void Invalidate(std::string_view name);

  // Everything known (all devices, idle ones included), sorted by name, after bringing it up to date.
  StatusOr<std::vector<BlockEntry>> Snapshot();
  // What a fresh scan of `roots` finds, in Snapshot's form; tests compare the two.
  static StatusOr<std::vector<BlockEntry>> FreshScan(const BlockDeviceRoots& roots);

  struct Counters {
    uint64_t rescans = 0;         // full scans, the first one included
    uint64_t events_applied = 0;  // block-device uevents applied
    uint64_t overflows = 0;       // ENOBUFS from the event socket
    uint64_t gaps = 0;            // rescans because events were missing though none overflowed
  };
  Counters counters() const;
  bool listening() const { return socket_.valid(); }

 private:
  // Brings the map up to date (see the file comment). Called with mutex_ held.
  Status SyncLocked();
  Status RescanLocked();
  // Reads everything the socket holds; names of block devices go to `touched`. False on ENOBUFS.
  bool DrainLocked(std::vector<std::string>& touched);
  void RefreshLocked(const std::string& name);
  std::optional<uint64_t> ReadSeqnum() const;
  void ReopenLocked();

  BlockDeviceRoots roots_;
  BlockInventoryOptions options_;
  UniqueFd class_dir_;  // <sys>/class/block
  UniqueFd seqnum_;     // <sys>/kernel/uevent_seqnum
  UniqueFd socket_;     // NETLINK_KOBJECT_UEVENT, group 1; invalid: every query rescans

  mutable std::mutex mutex_;
  std::map<std::string, BlockEntry> devices_;  // by kernel name
  DiskList listed_;                            // ListDisks' answer for devices_ as it is; null after a change
  std::vector<std::string> invalid_;           // names to re-read at the next query
  bool scanned_ = false;
  uint64_t last_seqnum_ = 0;  // the highest SEQNUM applied (or the counter before the last rescan)
  std::chrono::steady_clock::time_point last_scan_;
  Counters counters_;
};

}  // namespace csi_proxy::common

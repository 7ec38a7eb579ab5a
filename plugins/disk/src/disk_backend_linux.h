// The disk group on Linux: the block-device inventory (kept current from uevents) for discovery, sysfs for
// state, libblkid to see what a disk holds, libfdisk to write the partition table, BLKPG to tell the kernel.
#pragma once

#include <string>

#include "block_device_scan_linux.h"
#include "block_inventory_linux.h"
#include "disk_backend.h"
#include "disk_offline_linux.h"

namespace csi_proxy::disk {

struct LinuxDiskOptions {
  // GPT type of the partition PartitionDisk creates; upstream's "Microsoft basic data" by default.
  std::string gpt_partition_type = kBasicDataPartitionType;
  // [host] state_dir: where the offline state of disks without a kernel state is kept (<state_dir>/disk/offline).
  // Empty: only SCSI disks can be taken offline.
  std::string state_dir;
  common::BlockDeviceRoots roots;  // tests point these at a fabricated sysfs
  common::BlockInventoryOptions inventory;
};

class LinuxDiskBackend final : public DiskBackend {
 public:
  explicit LinuxDiskBackend(LinuxDiskOptions options = {});

  StatusOr<std::map<uint32_t, DiskLocation>> ListDiskLocations() override;
  Status PartitionDisk(uint32_t disk_number) override;
  Status Rescan() override;
  StatusOr<std::map<uint32_t, DiskIds>> ListDiskIds() override;
  StatusOr<int64_t> GetDiskSize(uint32_t disk_number) override;
  Status SetDiskState(uint32_t disk_number, bool online) override;
  StatusOr<bool> GetDiskState(uint32_t disk_number) override;
  StatusOr<uint32_t> FindDiskByPage83(const std::string& page83) override;

 private:
  Status WritePartitionTable(const common::BlockDevice& disk, int disk_fd, uint32_t& partition_number,
                             uint64_t& start_bytes, uint64_t& size_bytes);
  std::string DeviceKind(const common::BlockDevice& disk) const;
  // Flushes the disk and its partitions and drops their cached pages, before it goes offline.
  Status FlushAndDropCaches(const common::BlockDevice& disk);

  LinuxDiskOptions options_;
  common::BlockDevices devices_;      // sysfs read directly: what changes read (holders, partitions being made)
  common::BlockInventory inventory_;  // what the listings answer from
  common::OfflineDisks offline_;      // offline state: the kernel's for SCSI, records under state_dir otherwise
};

}  // namespace csi_proxy::disk

// The disk group on Linux: sysfs for discovery and state, libblkid to see what a disk holds, libfdisk to write
// the partition table, BLKRRPART/BLKPG to tell the kernel.
#pragma once

#include <string>

#include "block_device_scan_linux.h"
#include "disk_backend.h"

namespace csi_proxy::disk {

struct LinuxDiskOptions {
  // GPT type of the partition PartitionDisk creates; upstream's "Microsoft basic data" by default.
  std::string gpt_partition_type = kBasicDataPartitionType;
  common::BlockDeviceRoots roots;  // tests point these at a fabricated sysfs
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

  LinuxDiskOptions options_;
  common::BlockDevices devices_;
};

}  // namespace csi_proxy::disk

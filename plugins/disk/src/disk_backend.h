// The disk group's OS interface: what the service layer needs from the machine, in version-neutral types.
// The Linux implementation is disk_backend_linux.*; a Windows one would implement the same interface.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "csi_proxy/status.hpp"

namespace csi_proxy::disk {

// Where a disk is attached. Upstream's fields, filled from the SCSI address (host, channel, target, LUN).
struct DiskLocation {
  std::string adapter;
  std::string bus;
  std::string target;
  std::string lun_id;
};

struct DiskIds {
  std::string page83;
  std::string serial_number;
};

class DiskBackend {
 public:
  virtual ~DiskBackend() = default;

  // Disks with a SCSI address, by disk number; disks without one are left out.
  virtual StatusOr<std::map<uint32_t, DiskLocation>> ListDiskLocations() = 0;
  // Gives a disk without partitions a partition table (GPT) with one partition over the whole disk. A disk that
  // already has a partition is left alone (success).
  virtual Status PartitionDisk(uint32_t disk_number) = 0;
  // Makes the kernel notice new disks, new sizes and changed partition tables.
  virtual Status Rescan() = 0;
  virtual StatusOr<std::map<uint32_t, DiskIds>> ListDiskIds() = 0;
  // Size of the whole disk in bytes.
  virtual StatusOr<int64_t> GetDiskSize(uint32_t disk_number) = 0;
  // Takes a disk offline (refused while it is in use) or brings it online. SCSI disks through the kernel's device
  // state; every other disk's offline state is kept by the host (disk_offline_linux.h on Linux).
  virtual Status SetDiskState(uint32_t disk_number, bool online) = 0;
  virtual StatusOr<bool> GetDiskState(uint32_t disk_number) = 0;
  // The disk whose page 0x83 identifier is exactly `page83` (disk v1alpha1's GetDiskNumberByName).
  virtual StatusOr<uint32_t> FindDiskByPage83(const std::string& page83) = 0;
};

// Upstream's GPT type for the partition PartitionDisk creates: "Microsoft basic data".
inline constexpr const char* kBasicDataPartitionType = "ebd0a0a2-b9e5-4433-87c0-68b6b72699c7";

// What the group's configuration sets for the platform's backend.
struct DiskBackendOptions {
  std::string gpt_partition_type = kBasicDataPartitionType;  // lowercase 8-4-4-4-12 hex
  // [host] state_dir: the offline state of disks without a kernel state is kept under <state_dir>/disk/offline.
  std::string state_dir;
};

// The platform's backend (on Linux defined in disk_backend_linux.cc).
std::unique_ptr<DiskBackend> MakeDiskBackend(const DiskBackendOptions& options);

}  // namespace csi_proxy::disk

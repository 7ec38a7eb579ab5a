// The disk group's version-neutral service: validates requests, serializes work on one disk, calls the backend.
// Every API version's adapter calls this; none of them talks to the OS.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "disk_backend.h"
#include "keyed_mutex.h"

namespace csi_proxy::disk {

class DiskService {
 public:
  explicit DiskService(std::unique_ptr<DiskBackend> backend) : backend_(std::move(backend)) {}

  StatusOr<std::map<uint32_t, DiskLocation>> ListDiskLocations();
  Status PartitionDisk(uint32_t disk_number);
  Status Rescan();
  StatusOr<std::map<uint32_t, DiskIds>> ListDiskIds();
  StatusOr<int64_t> GetDiskStats(uint32_t disk_number);
  Status SetDiskState(uint32_t disk_number, bool online);
  StatusOr<bool> GetDiskState(uint32_t disk_number);
  StatusOr<uint32_t> GetDiskNumberByName(const std::string& page83);

  // Older API versions name disks by decimal strings ("3"). INVALID_ARGUMENT for anything else.
  static StatusOr<uint32_t> ParseDiskId(std::string_view disk_id);

 private:
  common::KeyedMutex::Lock LockDisk(uint32_t disk_number) { return locks_.Hold("disk/" + std::to_string(disk_number)); }

  std::unique_ptr<DiskBackend> backend_;
  common::KeyedMutex locks_;
};

}  // namespace csi_proxy::disk

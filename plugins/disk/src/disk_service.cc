// The disk group's version-neutral service; see disk_service.h.
#include "disk_service.h"

#include "block_devices_linux.h"

namespace csi_proxy::disk {

StatusOr<std::map<uint32_t, DiskLocation>> DiskService::ListDiskLocations() { return backend_.ListDiskLocations(); }

Status DiskService::PartitionDisk(uint32_t disk_number) {
  auto lock = LockDisk(disk_number);
  return backend_.PartitionDisk(disk_number);
}

Status DiskService::Rescan() { return backend_.Rescan(); }

StatusOr<std::map<uint32_t, DiskIds>> DiskService::ListDiskIds() { return backend_.ListDiskIds(); }

StatusOr<int64_t> DiskService::GetDiskStats(uint32_t disk_number) { return backend_.GetDiskSize(disk_number); }

Status DiskService::SetDiskState(uint32_t disk_number, bool online) {
  auto lock = LockDisk(disk_number);
  return backend_.SetDiskState(disk_number, online);
}

StatusOr<bool> DiskService::GetDiskState(uint32_t disk_number) { return backend_.GetDiskState(disk_number); }

StatusOr<uint32_t> DiskService::GetDiskNumberByName(const std::string& page83) {
  if (page83.empty()) return InvalidArgument("disk name (page 0x83 identifier) is empty");
  return backend_.FindDiskByPage83(page83);
}

StatusOr<uint32_t> DiskService::ParseDiskId(std::string_view disk_id) {
  if (disk_id.empty()) return InvalidArgument("disk id is empty");
  if (disk_id.size() > 10) return InvalidArgument("disk id " + common::QuotePath(disk_id) + " is not a disk number");
  uint64_t value = 0;
  for (char c : disk_id) {
    if (c < '0' || c > '9') {
      return InvalidArgument("disk id " + common::QuotePath(disk_id) + " is not a disk number");
    }
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  if (value > UINT32_MAX) return InvalidArgument("disk id " + common::QuotePath(disk_id) + " is out of range");
  return static_cast<uint32_t>(value);
}

}  // namespace csi_proxy::disk

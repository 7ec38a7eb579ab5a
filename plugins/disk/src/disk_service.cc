// The disk group's version-neutral service; see disk_service.h.
#include "disk_service.h"

#include "device_naming.h"

namespace csi_proxy::disk {

StatusOr<std::map<uint32_t, DiskLocation>> DiskService::ListDiskLocations() { return backend_->ListDiskLocations(); }

Status DiskService::PartitionDisk(uint32_t disk_number) {
  auto lock = LockDisk(disk_number);
  return backend_->PartitionDisk(disk_number);
}

Status DiskService::Rescan() { return backend_->Rescan(); }

StatusOr<std::map<uint32_t, DiskIds>> DiskService::ListDiskIds() { return backend_->ListDiskIds(); }

StatusOr<int64_t> DiskService::GetDiskStats(uint32_t disk_number) { return backend_->GetDiskSize(disk_number); }

Status DiskService::SetDiskState(uint32_t disk_number, bool online) {
  auto lock = LockDisk(disk_number);
  return backend_->SetDiskState(disk_number, online);
}

StatusOr<bool> DiskService::GetDiskState(uint32_t disk_number) { return backend_->GetDiskState(disk_number); }

StatusOr<uint32_t> DiskService::GetDiskNumberByName(const std::string& page83) {
  if (page83.empty()) return InvalidArgument("disk name (page 0x83 identifier) is empty");
  return backend_->FindDiskByPage83(page83);
}

StatusOr<uint32_t> DiskService::ParseDiskId(std::string_view disk_id) { return common::ParseDiskNumber(disk_id); }

}  // namespace csi_proxy::disk

// The volume group's version-neutral service; see volume_service.h.
#include "volume_service.h"

#include "device_naming.h"
#include "text.h"

namespace csi_proxy::volume {
namespace {

// Lock keys: a volume by its canonical ID, a target by every spelling of its path (PathPolicy::SameObjectKey: on
// Windows without regard to case). Where both are held, the volume's lock is taken first, everywhere, so two calls
// can never wait for each other.
std::string VolumeKey(const std::string& canonical_id) { return "volume:" + canonical_id; }
std::string TargetKey(const common::PathPolicy& policy, const common::ConfinedPath& target) {
  return "target:" + policy.SameObjectKey(target);
}

bool IsDecimal(const std::string& text) {
  return !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
}

}  // namespace

StatusOr<ResolvedVolume> VolumeService::Resolve(const std::string& volume_id) {
  if (volume_id.empty()) return InvalidArgument("volume id is empty");
  return backend_->ResolveVolume(volume_id);
}

StatusOr<common::ConfinedPath> VolumeService::Target(const std::string& target_path, bool may_be_root) {
  if (target_path.empty()) return InvalidArgument("target path is empty");
  CSI_PROXY_ASSIGN_OR_RETURN(auto target, policy_.Confine(target_path, "target_path"));
  if (!may_be_root && target.is_root()) {
    return InvalidArgument("target_path " + common::QuotePath(target_path) +
                           " is an allowed root itself; mount volumes in a directory below it");
  }
  return target;
}

StatusOr<std::vector<std::string>> VolumeService::ListVolumesOnDisk(uint32_t disk_number, uint32_t partition_number) {
  return backend_->ListVolumesOnDisk(disk_number, partition_number);
}

Status VolumeService::MountVolume(const std::string& volume_id, const std::string& target_path) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto volume, Resolve(volume_id));
  CSI_PROXY_ASSIGN_OR_RETURN(auto target, Target(target_path, /*may_be_root=*/false));
  auto volume_lock = locks_.Hold(VolumeKey(volume.id));
  auto target_lock = locks_.Hold(TargetKey(policy_, target));
  return backend_->MountVolume(volume, target);
}

Status VolumeService::UnmountVolume(const std::string& volume_id, const std::string& target_path) {
  if (volume_id.empty()) return InvalidArgument("volume id is empty");
  CSI_PROXY_ASSIGN_OR_RETURN(auto target, Target(target_path, /*may_be_root=*/false));
  // A volume whose device has gone can still be unmounted: the backend matches it by its old name.
  auto resolved = backend_->ResolveVolume(volume_id);
  if (!resolved.ok() && resolved.status().code() != Code::kNotFound) return resolved.status();
  const ResolvedVolume volume = resolved.ok() ? std::move(*resolved) : ResolvedVolume{volume_id, {}};
  auto volume_lock = locks_.Hold(VolumeKey(volume.id));
  auto target_lock = locks_.Hold(TargetKey(policy_, target));
  return backend_->UnmountVolume(volume, target);
}

StatusOr<bool> VolumeService::IsVolumeFormatted(const std::string& volume_id) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto volume, Resolve(volume_id));
  auto lock = locks_.Hold(VolumeKey(volume.id));
  return backend_->IsVolumeFormatted(volume);
}

Status VolumeService::FormatVolume(const std::string& volume_id, const FormatOptions& options) {
  if (!options.fs_type.empty() && !IsSupportedFilesystem(options.fs_type)) {
    std::string supported;
    for (std::string_view fs : SupportedFilesystems()) supported += (supported.empty() ? "" : ", ") + std::string(fs);
    return InvalidArgument("fs_type " + common::QuoteValue(options.fs_type) +
                           " is not a filesystem FormatVolume creates (" + supported + ")");
  }
  const std::string fs_type = options.fs_type.empty() ? backend_->DefaultFilesystem() : options.fs_type;
  CSI_PROXY_RETURN_IF_ERROR(CheckMkfsOptions(fs_type, options.mkfs_options));
  CSI_PROXY_ASSIGN_OR_RETURN(auto volume, Resolve(volume_id));
  auto lock = locks_.Hold(VolumeKey(volume.id));
  return backend_->FormatVolume(volume, options);
}

StatusOr<std::string> VolumeService::VolumeOfDiskNumber(const std::string& disk_id) {
  CSI_PROXY_ASSIGN_OR_RETURN(uint32_t disk, common::ParseDiskNumber(disk_id));
  CSI_PROXY_ASSIGN_OR_RETURN(auto volumes, backend_->ListVolumesOnDisk(disk, 0));
  if (volumes.size() == 1) return volumes.front();
  std::string listed;
  for (const auto& id : volumes) listed += (listed.empty() ? "" : ", ") + id;
  return InvalidArgument("volume id " + common::QuotePath(disk_id) + " is a disk number, and disk " + disk_id +
                         " has " + std::to_string(volumes.size()) + " volumes" +
                         (listed.empty() ? "" : " (" + listed + ")") +
                         "; a disk number names a volume only when the disk has exactly one (pass a volume id from "
                         "ListVolumesOnDisk)");
}

Status VolumeService::ResizeVolume(const std::string& volume_id, int64_t size_bytes) {
  if (size_bytes < 0) return InvalidArgument("invalid negative size " + std::to_string(size_bytes));
  // azuredisk ends every stage with ResizeVolume{volume_id: "<disk number>"} (its own HostProcess path takes the
  // disk's volume): a decimal disk number names the disk's only volume.
  if (IsDecimal(volume_id)) {
    CSI_PROXY_ASSIGN_OR_RETURN(auto id, VolumeOfDiskNumber(volume_id));
    return ResizeVolume(id, size_bytes);
  }
  CSI_PROXY_ASSIGN_OR_RETURN(auto volume, Resolve(volume_id));
  auto lock = locks_.Hold(VolumeKey(volume.id));
  return backend_->ResizeVolume(volume, size_bytes);
}

StatusOr<VolumeStats> VolumeService::GetVolumeStats(const std::string& volume_id) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto volume, Resolve(volume_id));
  auto lock = locks_.Hold(VolumeKey(volume.id));
  return backend_->GetVolumeStats(volume);
}

StatusOr<uint32_t> VolumeService::GetDiskNumberFromVolumeId(const std::string& volume_id) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto volume, Resolve(volume_id));
  return backend_->GetDiskNumber(volume);
}

StatusOr<std::string> VolumeService::GetVolumeIdFromTargetPath(const std::string& target_path) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto target, Target(target_path, /*may_be_root=*/true));
  return backend_->GetVolumeIdFromTargetPath(target);
}

StatusOr<std::string> VolumeService::GetClosestVolumeIdFromTargetPath(const std::string& target_path) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto target, Target(target_path, /*may_be_root=*/true));
  return backend_->GetClosestVolumeIdFromTargetPath(target);
}

Status VolumeService::WriteVolumeCache(const std::string& volume_id) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto volume, Resolve(volume_id));
  auto lock = locks_.Hold(VolumeKey(volume.id));
  return backend_->WriteVolumeCache(volume);
}

StatusOr<uint32_t> VolumeService::ParseDiskId(std::string_view disk_id) { return common::ParseDiskNumber(disk_id); }

}  // namespace csi_proxy::volume

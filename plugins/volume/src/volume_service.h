// The volume group's version-neutral service: checks every request (IDs present, sizes sane, target paths under
// the allowed roots), serializes work on one volume and one target path, and calls the backend. Every API
// version's adapter calls this; none of them talks to the OS.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "keyed_mutex.h"
#include "path_policy.h"
#include "volume_backend.h"

namespace csi_proxy::volume {

class VolumeService {
 public:
  // `backend` mounts on the targets `policy` lets through (MakeVolumeBackend with the same policy).
  VolumeService(std::unique_ptr<VolumeBackend> backend, common::PathPolicy policy)
      : backend_(std::move(backend)), policy_(std::move(policy)) {}

  StatusOr<std::vector<std::string>> ListVolumesOnDisk(uint32_t disk_number, uint32_t partition_number);
  Status MountVolume(const std::string& volume_id, const std::string& target_path);
  Status UnmountVolume(const std::string& volume_id, const std::string& target_path);
  StatusOr<bool> IsVolumeFormatted(const std::string& volume_id);
  // `options` (csi-proxy's own fields, format_options.h): a filesystem IsSupportedFilesystem allows and mkfs
  // options from the allow-list; INVALID_ARGUMENT naming what is refused.
  Status FormatVolume(const std::string& volume_id, const FormatOptions& options = {});
  // `volume_id` may also be a decimal disk number (azuredisk sends one): the disk's only volume; INVALID_ARGUMENT
  // naming the count when the disk has none or several.
  Status ResizeVolume(const std::string& volume_id, int64_t size_bytes);
  StatusOr<VolumeStats> GetVolumeStats(const std::string& volume_id);
  StatusOr<uint32_t> GetDiskNumberFromVolumeId(const std::string& volume_id);
  StatusOr<std::string> GetVolumeIdFromTargetPath(const std::string& target_path);
  StatusOr<std::string> GetClosestVolumeIdFromTargetPath(const std::string& target_path);
  Status WriteVolumeCache(const std::string& volume_id);

  const common::PathPolicy& policy() const { return policy_; }

  // Older API versions name disks by decimal strings ("3"). INVALID_ARGUMENT for anything else.
  static StatusOr<uint32_t> ParseDiskId(std::string_view disk_id);

 private:
  // Resolves a volume ID once per request; the backend gets the result.
  StatusOr<ResolvedVolume> Resolve(const std::string& volume_id);
  StatusOr<common::ConfinedPath> Target(const std::string& target_path, bool may_be_root);
  // The one volume of the disk whose decimal number `disk_id` is.
  StatusOr<std::string> VolumeOfDiskNumber(const std::string& disk_id);

  std::unique_ptr<VolumeBackend> backend_;
  common::PathPolicy policy_;
  common::KeyedMutex locks_;
};

}  // namespace csi_proxy::volume

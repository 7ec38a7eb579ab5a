// The mount points the volume group's MountVolume made, for the filesystem group's forced Rmdir (another library)
// and the volume group's FormatVolume of a mounted volume (formatted in place only when every mount of it is one).
//
// Windows removes a volume mount point when the directory is removed (RemoveDirectory of the junction), and
// azuredisk unstages with a forced Rmdir and no UnmountVolume. Here a forced Rmdir unmounts a mount point only
// when it is one MountVolume made: the volume group records every mount point it makes under
// <state_dir>/volume/mounts (state_records_linux.h), keyed by the mount point's real path, with the device
// mounted; a mount counts as made by MountVolume while the mount table shows that device mounted at that path.
// Nothing in a request decides it, a record without its mount is ignored, and the record survives a restart of
// the proxy. Every other mount (a bind mount, tmpfs, a mount of kubelet or of another tool) stays refused. Windows
// formats a mounted volume in place too (Format-Volume dismounts it and its mount points stay), under the same rule.
#pragma once

#include <string>

#include "block_device_scan_linux.h"
#include "csi_proxy/status.hpp"
#include "mount_table_linux.h"
#include "state_records_linux.h"

namespace csi_proxy::common {

class VolumeMounts {
 public:
  // Records in <state_dir>/volume/mounts. An empty `state_dir` keeps none (and recognises none).
  explicit VolumeMounts(const std::string& state_dir);

  static std::string RecordsDir(const std::string& state_dir) { return state_dir + "/volume/mounts"; }
  bool enabled() const { return enabled_; }

  // Records that MountVolume mounts (or mounted) `device` at `mount_point` (the real path, as the mount table
  // will show it).
  Status Record(const std::string& mount_point, const BlockDevice& device) const;
  // Forgets the mount point (after it was unmounted); no record is success.
  Status Forget(const std::string& mount_point) const;
  // Whether `mount` is one that MountVolume made: a record for its mount point names the device it mounts.
  StatusOr<bool> MadeByMountVolume(const MountEntry& mount) const;

 private:
  bool enabled_;
  StateRecords records_;
};

}  // namespace csi_proxy::common

// Mounting for the volume group with the kernel's mount API (fsopen/fsconfig/fsmount/move_mount): a filesystem
// is mounted onto a directory descriptor that was opened under the path policy, so no path is looked up twice;
// read-only "detached" mounts that are attached nowhere give filesystem figures of unmounted volumes.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "csi_proxy/status.hpp"
#include "mount_table_linux.h"
#include "unique_fd_linux.h"

namespace csi_proxy::volume {

// The mount a descriptor lies on (statx's mount id looked up in mountinfo) and whether the descriptor is that
// mount's root (i.e. the path is a mount point).
struct MountOfFd {
  bool is_mount_root = false;
  common::MountEntry entry;
};
StatusOr<MountOfFd> FindMountOf(int fd);

struct MountRequest {
  std::string device;
  std::string fs_type;
  bool read_only = false;  // read-only superblock and mount, without journal replay (for looking only)
  // nosuid and nodev: setuid/setgid bits and device files on the volume give nobody anything. Only an admin's
  // group key turns this off for MountVolume.
  bool nosuid_nodev = true;
  // When set, exactly these mount attributes (MOUNT_ATTR_*) instead of those read_only and nosuid_nodev give: a
  // mount made again as it was (MountAttributesOf).
  std::optional<unsigned int> attributes;
};

// The attributes (MOUNT_ATTR_*: read-only, nosuid, nodev, noexec, atime handling) of the mount that `fd` lies on.
StatusOr<unsigned int> MountAttributesOf(int fd);

// A filesystem instance mounted nowhere. Attach() puts it on a directory; dropping it unattached leaves nothing.
class DetachedMount {
 public:
  // On failure, `failed_errno` (if given) receives the kernel's errno (0 when the failure was not the kernel's).
  static StatusOr<DetachedMount> Create(const MountRequest& request, int* failed_errno = nullptr);
  int fd() const { return mount_fd_.get(); }
  // move_mount onto `dir_fd` (an O_PATH descriptor of a directory).
  Status AttachAt(int dir_fd, const std::string& dir_for_messages);

 private:
  common::UniqueFd mount_fd_;
};

// The device mounted on a fresh private directory below `scratch_dir` (mode 0700); unmounted and removed on
// destruction. Programs that need a mount point (xfs_growfs, online resize2fs) use it for unmounted volumes.
class TemporaryMount {
 public:
  static StatusOr<std::unique_ptr<TemporaryMount>> Create(const std::string& scratch_dir, const MountRequest& request);
  ~TemporaryMount();
  TemporaryMount(const TemporaryMount&) = delete;
  TemporaryMount& operator=(const TemporaryMount&) = delete;
  const std::string& path() const { return path_; }

 private:
  TemporaryMount() = default;
  std::string path_;
  bool mounted_ = false;
};

}  // namespace csi_proxy::volume

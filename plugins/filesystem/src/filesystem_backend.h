// The OS interface of the filesystem group: acts on paths the service layer has already checked against the
// allowed roots, in version-neutral types. Both implementations (filesystem_backend_linux.*,
// filesystem_backend_windows.cc) open every path through common::OpenParent / OpenFollowing (never by string), so
// a link inside a root (a symlink; on Windows also a junction or a volume mount point) cannot redirect it outside.
#pragma once

#include <memory>
#include <string>

#include "csi_proxy/log.hpp"
#include "csi_proxy/status.hpp"
#include "path_policy.h"

namespace csi_proxy::filesystem {

struct FilesystemOptions {
  // [host] state_dir: where the volume group records the mount points MountVolume made and the SMB group the
  // users of its mappings (plugins/common/volume_mounts_linux.h, smb_mapping_users.h). Empty: neither is read, so
  // a forced Rmdir unmounts nothing and releases no mapping. On Windows only the SMB mapping users are read: a
  // forced Rmdir removes every volume mount point it meets, as Windows does.
  std::string state_dir;
  sdk::LogSink log;
};

class FilesystemBackend {
 public:
  virtual ~FilesystemBackend() = default;

  // Whether something (a dangling symlink included) exists at `path`; a final symlink is not followed.
  virtual StatusOr<bool> PathExists(const common::ConfinedPath& path) = 0;

  // mkdir -p: creates missing directories; an existing directory (or a symlink to one inside the roots) is
  // success, anything else in the way is FAILED_PRECONDITION.
  virtual Status MakeDirectories(const common::ConfinedPath& path) = 0;

  // Removes one file, symlink (not its target) or empty directory. NOT_FOUND if missing, FAILED_PRECONDITION if
  // a non-empty directory or a mount point.
  virtual Status RemoveEntry(const common::ConfinedPath& path) = 0;

  // Removes `path` and everything below it without following symlinks and without entering another mount.
  // A missing path is success. A mount point that MountVolume made (the path itself, or one below it) is
  // unmounted first, as Windows removes a volume mount point with its directory (the volume and its data stay);
  // whatever stays because it is (or is under) another mount point is reported as FAILED_PRECONDITION
  // "not removed: <path> is a mount point"; everything else that can go is removed.
  virtual Status RemoveTree(const common::ConfinedPath& path) = 0;

  // Removes everything inside the directory `path` (a final symlink is followed inside the roots), with the
  // rules of RemoveTree; the directory itself stays. NOT_FOUND if missing.
  virtual Status RemoveContents(const common::ConfinedPath& path) = 0;

  // Creates the symlink `link` whose text is `source.path`. The source must not lead outside the roots and link
  // target dirs (it need not exist); the link's parent must exist; ALREADY_EXISTS if something is at `link`.
  virtual Status CreateSymlink(const common::ConfinedPath& source, const common::ConfinedPath& link) = 0;

  // True for a symlink whose target exists inside the roots (or a link target dir), and for a mount point;
  // false for a dangling symlink, a loop and anything else. NOT_FOUND if missing; PERMISSION_DENIED for a
  // symlink leading elsewhere.
  virtual StatusOr<bool> IsSymlink(const common::ConfinedPath& path) = 0;
};

// The platform's backend (defined in filesystem_backend_linux.cc or filesystem_backend_windows.cc). `policy` is the one
// the service checks paths with.
std::unique_ptr<FilesystemBackend> MakeFilesystemBackend(common::PathPolicy policy, FilesystemOptions options);

}  // namespace csi_proxy::filesystem

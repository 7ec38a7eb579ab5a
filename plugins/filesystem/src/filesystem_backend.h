// The OS layer of the filesystem group: acts on paths the service layer has already checked against the
// allowed roots. Every operation opens its path through common::OpenParent / OpenFollowing (never by string),
// so a symlink inside a root cannot redirect it outside. One implementation per platform
// (filesystem_backend_linux.cc).
#pragma once

#include "csi_proxy/status.hpp"
#include "path_policy.h"

namespace csi_proxy::filesystem {

class FilesystemBackend {
 public:
  explicit FilesystemBackend(const common::PathPolicy& policy) : policy_(policy) {}

  // Whether something (a dangling symlink included) exists at `path`; a final symlink is not followed.
  StatusOr<bool> PathExists(const common::ConfinedPath& path);

  // mkdir -p: creates missing directories; an existing directory (or a symlink to one inside the roots) is
  // success, anything else in the way is FAILED_PRECONDITION.
  Status MakeDirectories(const common::ConfinedPath& path);

  // Removes one file, symlink (not its target) or empty directory. NOT_FOUND if missing, FAILED_PRECONDITION if
  // a non-empty directory or a mount point.
  Status RemoveEntry(const common::ConfinedPath& path);

  // Removes `path` and everything below it without following symlinks and without entering another mount.
  // A missing path is success. Whatever stays because it is (or is under) a mount point is reported as
  // FAILED_PRECONDITION "not removed: <path> is a mount point"; everything else that can go is removed.
  Status RemoveTree(const common::ConfinedPath& path);

  // Removes everything inside the directory `path` (a final symlink is followed inside the roots), with the
  // rules of RemoveTree; the directory itself stays. NOT_FOUND if missing.
  Status RemoveContents(const common::ConfinedPath& path);

  // Creates the symlink `link` whose text is `source.path`. The source must not lead outside the roots and link
  // target dirs (it need not exist); the link's parent must exist; ALREADY_EXISTS if something is at `link`.
  Status CreateSymlink(const common::ConfinedPath& source, const common::ConfinedPath& link);

  // True for a symlink whose target exists inside the roots (or a link target dir), and for a mount point;
  // false for a dangling symlink, a loop and anything else. NOT_FOUND if missing; PERMISSION_DENIED for a
  // symlink leading elsewhere.
  StatusOr<bool> IsSymlink(const common::ConfinedPath& path);

 private:
  const common::PathPolicy& policy_;
};

}  // namespace csi_proxy::filesystem

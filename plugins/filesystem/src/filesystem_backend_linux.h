// The filesystem group on Linux: *at() calls on descriptors opened beneath the allowed roots, AT_SYMLINK_NOFOLLOW
// on the final component, and a removal walk that never crosses a mount (but unmounts the mount points
// MountVolume made, and releases the SMB mappings whose last local_path link it removed).
#pragma once

#include "filesystem_backend.h"
#include "path_policy.h"

namespace csi_proxy::filesystem {

class LinuxFilesystemBackend final : public FilesystemBackend {
 public:
  LinuxFilesystemBackend(common::PathPolicy policy, FilesystemOptions options)
      : policy_(std::move(policy)), options_(std::move(options)) {}

  StatusOr<bool> PathExists(const common::ConfinedPath& path) override;
  Status MakeDirectories(const common::ConfinedPath& path) override;
  Status RemoveEntry(const common::ConfinedPath& path) override;
  Status RemoveTree(const common::ConfinedPath& path) override;
  Status RemoveContents(const common::ConfinedPath& path) override;
  Status CreateSymlink(const common::ConfinedPath& source, const common::ConfinedPath& link) override;
  StatusOr<bool> IsSymlink(const common::ConfinedPath& path) override;

 private:
  // After a removal at `path`: SMB mappings whose last local_path link was at or below it are unmapped. Never
  // fails the removal: a mapping it cannot release is logged and stays.
  void ReleaseSmbMappings(const common::ConfinedPath& path);

  common::PathPolicy policy_;
  FilesystemOptions options_;
};

}  // namespace csi_proxy::filesystem

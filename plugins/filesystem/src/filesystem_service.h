// The version-agnostic service layer of the filesystem group: every API version's adapter calls this.
// It checks each path against the allowed roots (kubelet path and working dirs), serializes operations on the
// same path, and hands the confined paths to the OS layer. No protobuf here.
#pragma once

#include <memory>
#include <string_view>
#include <utility>

#include "csi_proxy/status.hpp"
#include "filesystem_backend.h"
#include "keyed_mutex.h"
#include "path_policy.h"

namespace csi_proxy::filesystem {

class FilesystemService {
 public:
  // `backend` acts on the paths `policy` lets through (MakeFilesystemBackend with the same policy).
  FilesystemService(std::unique_ptr<FilesystemBackend> backend, common::PathPolicy policy)
      : backend_(std::move(backend)), policy_(std::move(policy)) {}
  FilesystemService(const FilesystemService&) = delete;
  FilesystemService& operator=(const FilesystemService&) = delete;

  // Whether something exists at `path` (a dangling symlink counts; a final symlink is not followed).
  StatusOr<bool> PathExists(std::string_view path);
  // Creates `path` and missing parents; an existing directory is success.
  Status Mkdir(std::string_view path);
  // Without force: removes a file, a symlink or an empty directory; a missing path is NOT_FOUND.
  // With force: removes the whole tree without following symlinks or entering other mounts (a mount point that
  // MountVolume made is unmounted first, as on Windows); missing is success. An SMB mapping whose last
  // local_path link went with the path is unmapped.
  Status Rmdir(std::string_view path, bool force);
  // Empties the directory `path` with the rules of a forced Rmdir; the directory stays.
  Status RmdirContents(std::string_view path);
  // Creates the symlink `target_path` pointing at `source_path`; both must be inside the allowed roots.
  Status CreateSymlink(std::string_view source_path, std::string_view target_path);
  // True for a symlink whose target exists, or a mount point; a missing path is NOT_FOUND.
  StatusOr<bool> IsSymlink(std::string_view path);

  const common::PathPolicy& policy() const { return policy_; }

 private:
  std::unique_ptr<FilesystemBackend> backend_;
  common::PathPolicy policy_;
  common::KeyedMutex locks_;  // keyed by PathPolicy::SameObjectKey (the normalized path)
};

}  // namespace csi_proxy::filesystem

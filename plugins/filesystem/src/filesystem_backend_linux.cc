// The filesystem group on Linux; see filesystem_backend_linux.h.
#include "filesystem_backend_linux.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "confined_open_linux.h"
#include "errno_linux.h"
#include "mount_table_linux.h"
#include "removal_problems.h"
#include "smb_mapping_users_linux.h"
#include "text.h"
#include "unmount_linux.h"
#include "volume_mounts_linux.h"

namespace csi_proxy::filesystem {
namespace {

using common::Access;
using common::ConfinedPath;
using common::ErrnoStatus;
using common::Openat2;
using common::QuotePath;
using common::UniqueFd;

// Deeper trees are not removed (each level holds one descriptor while the walk is inside it).
constexpr int kMaxDepth = 512;

Status MountPointKept(const std::string& shown) {
  return FailedPrecondition("not removed: " + QuotePath(shown) + " is a mount point");
}

// A removal walk: what it could not remove, and how it treats the mount points it meets.
struct Walk {
  RemovalProblems problems;
  const common::VolumeMounts* volume_mounts = nullptr;  // null: every mount point is kept
  const sdk::LogSink* log = nullptr;
};

// When `name` in `dirfd` is a mount point that MountVolume made, unmounts it as Windows removes a volume mount
// point with its directory (the volume and its data stay): flushed, then unmounted (not lazily: a volume with
// open files stays, and the call fails). True when it was unmounted; false for any other mount point.
StatusOr<bool> UnmountIfMadeByMountVolume(int dirfd, const std::string& name, const std::string& shown, Walk& walk) {
  if (walk.volume_mounts == nullptr || !walk.volume_mounts->enabled()) return false;
  struct statx stx {};
  if (::statx(dirfd, name.c_str(), AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, &stx) != 0 || !(stx.stx_mask & STATX_MNT_ID)) {
    return false;
  }
  CSI_PROXY_ASSIGN_OR_RETURN(auto table, common::ReadMountTable());
  auto mount = std::find_if(table.begin(), table.end(),
                            [&](const common::MountEntry& m) { return static_cast<uint64_t>(m.id) == stx.stx_mnt_id; });
  if (mount == table.end()) return false;
  CSI_PROXY_ASSIGN_OR_RETURN(bool ours, walk.volume_mounts->MadeByMountVolume(*mount));
  if (!ours) return false;

  {
    UniqueFd contents(::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (contents.valid()) ::syncfs(contents.get());  // flushed before it goes, as UnmountVolume does
  }
  if (int err = common::UnmountNotLazily("/proc/self/fd/" + std::to_string(dirfd) + "/" + name); err != 0) {
    if (err == EBUSY) {
      return FailedPrecondition("not removed: " + QuotePath(shown) + " is the mount point of volume " + mount->source +
                                " (made by MountVolume), which is busy (files open?)");
    }
    return ErrnoStatus(err, "unmounting " + QuotePath(shown));
  }
  CSI_PROXY_RETURN_IF_ERROR(walk.volume_mounts->Forget(mount->target));
  if (walk.log != nullptr && *walk.log) {
    (*walk.log)(sdk::LogLevel::kInfo, "unmounted volume " + mount->source + " from " + QuotePath(shown) +
                                          " (a forced Rmdir of a mount point MountVolume made)");
  }
  return true;
}

StatusOr<std::vector<std::string>> ListNames(int dirfd, const std::string& shown) {
  // A fresh open file description, so the listing starts at the beginning whatever dirfd is.
  int fd = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "listing " + QuotePath(shown));
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    int err = errno;
    ::close(fd);
    return ErrnoStatus(err, "listing " + QuotePath(shown));
  }
  std::vector<std::string> names;
  for (;;) {
    errno = 0;
    struct dirent* entry = ::readdir(dir);
    if (entry == nullptr) break;
    if (std::strcmp(entry->d_name, ".") == 0 || std::strcmp(entry->d_name, "..") == 0) continue;
    names.emplace_back(entry->d_name);
  }
  int err = errno;
  ::closedir(dir);
  if (err != 0) return ErrnoStatus(err, "listing " + QuotePath(shown));
  return names;
}

void RemoveChildren(int dirfd, const std::string& shown, int depth, Walk& walk);

// Removes `name` in `dirfd` and, for a directory on the same mount, everything below it. `shown` is the
// entry's full path for messages. Entries that change type while we look are looked at again.
void RemoveNamed(int dirfd, const std::string& name, const std::string& shown, int depth, Walk& walk) {
  RemovalProblems& problems = walk.problems;
  for (int attempt = 0; attempt < 4; ++attempt) {
    struct stat st;
    if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno != ENOENT) problems.Add(ErrnoStatus(errno, "examining " + QuotePath(shown)));
      return;
    }
    if (!S_ISDIR(st.st_mode)) {
      // Files, symlinks (never followed), sockets, devices.
      if (::unlinkat(dirfd, name.c_str(), 0) == 0 || errno == ENOENT) return;
      if (errno == EISDIR) continue;
      problems.Add(errno == EBUSY ? MountPointKept(shown) : ErrnoStatus(errno, "removing " + QuotePath(shown)));
      return;
    }
    // RESOLVE_NO_XDEV makes the kernel refuse to step onto another mount, bind mounts of the same filesystem
    // included, so a volume still mounted below is never entered.
    int child = Openat2(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW,
                        RESOLVE_BENEATH | RESOLVE_NO_XDEV | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
    if (child == -EXDEV) {
      auto unmounted = UnmountIfMadeByMountVolume(dirfd, name, shown, walk);
      if (!unmounted.ok()) return problems.Add(unmounted.status());
      if (*unmounted) continue;  // a plain directory again: removed on the next pass
      return problems.Add(MountPointKept(shown));
    }
    if (child == -ENOENT) return;
    if (child == -ENOTDIR || child == -ELOOP) continue;  // replaced by a file or a symlink meanwhile
    if (child < 0) return problems.Add(ErrnoStatus(-child, "opening " + QuotePath(shown)));
    UniqueFd child_fd(child);

    size_t before = problems.count();
    RemoveChildren(child_fd.get(), shown, depth + 1, walk);
    if (problems.count() != before) return;  // something below stays, so this directory stays too
    if (::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) == 0 || errno == ENOENT) return;
    if (errno == ENOTEMPTY) continue;  // something was created meanwhile: another pass
    problems.Add(errno == EBUSY ? MountPointKept(shown) : ErrnoStatus(errno, "removing " + QuotePath(shown)));
    return;
  }
  problems.Add(Internal("removing " + QuotePath(shown) + ": it keeps changing while it is being removed"));
}

void RemoveChildren(int dirfd, const std::string& shown, int depth, Walk& walk) {
  RemovalProblems& problems = walk.problems;
  if (depth > kMaxDepth) {
    return problems.Add(FailedPrecondition("not removed: " + QuotePath(shown) + " is nested more than " +
                                           std::to_string(kMaxDepth) + " directories deep"));
  }
  auto names = ListNames(dirfd, shown);
  if (!names.ok()) return problems.Add(names.status());
  for (const std::string& name : *names) RemoveNamed(dirfd, name, shown + "/" + name, depth, walk);
}

}  // namespace

StatusOr<bool> LinuxFilesystemBackend::PathExists(const ConfinedPath& path) {
  auto parent = common::OpenParent(policy_, path, "path", Access::kExamine);
  if (!parent.ok()) {
    if (parent.status().code() == Code::kNotFound) return false;
    return parent.status();
  }
  if (parent->name.empty()) return true;  // an allowed root, and it opened
  struct stat st;
  if (::fstatat(parent->dir.get(), parent->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) return true;
  if (errno == ENOENT || errno == ENOTDIR) return false;
  return ErrnoStatus(errno, "examining path " + QuotePath(path.path));
}

Status LinuxFilesystemBackend::MakeDirectories(const ConfinedPath& path) {
  return common::OpenCreatingDirs(policy_, path, "path").status();
}

void LinuxFilesystemBackend::ReleaseSmbMappings(const ConfinedPath& path) {
  common::SmbMappingUsers::ReleaseAfterRemoval(options_.state_dir, policy_, options_.log, path.path);
}

Status LinuxFilesystemBackend::RemoveEntry(const ConfinedPath& path) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto parent, common::OpenParent(policy_, path, "path", Access::kModify));
  if (parent.name.empty()) return PermissionDenied("refusing to remove allowed root " + QuotePath(path.path));
  int dir = parent.dir.get();
  const char* name = parent.name.c_str();
  // AT_REMOVEDIR does not follow a symlink (ENOTDIR), so a link is unlinked, never its target.
  int err = 0;
  if (::unlinkat(dir, name, AT_REMOVEDIR) != 0) {
    err = errno;
    if (err == ENOTDIR) err = ::unlinkat(dir, name, 0) == 0 ? 0 : errno;
  }
  if (err == 0) {
    ReleaseSmbMappings(path);
    return Status::Ok();
  }
  switch (err) {
    case ENOENT:
      return NotFound("path " + QuotePath(path.path) + " does not exist");
    case ENOTEMPTY:
    case EEXIST:
      return FailedPrecondition("path " + QuotePath(path.path) + " is a directory that is not empty (use force)");
    case EBUSY:
      return MountPointKept(path.path);
    default:
      return ErrnoStatus(err, "removing path " + QuotePath(path.path));
  }
}

Status LinuxFilesystemBackend::RemoveTree(const ConfinedPath& path) {
  auto parent = common::OpenParent(policy_, path, "path", Access::kModify);
  if (!parent.ok() && parent.status().code() == Code::kNotFound) {
    ReleaseSmbMappings(path);  // gone already, perhaps with links the SMB group still counts
    return Status::Ok();
  }
  if (!parent.ok()) return parent.status();
  if (parent->name.empty()) return PermissionDenied("refusing to remove allowed root " + QuotePath(path.path));
  common::VolumeMounts volume_mounts(options_.state_dir);
  Walk walk{.volume_mounts = &volume_mounts, .log = &options_.log};
  RemoveNamed(parent->dir.get(), parent->name, path.path, 0, walk);
  ReleaseSmbMappings(path);
  return walk.problems.Summary();
}

Status LinuxFilesystemBackend::RemoveContents(const ConfinedPath& path) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto dir, common::OpenFollowing(policy_, path, "path", Access::kModify));
  struct stat st;
  if (::fstat(dir.get(), &st) != 0) return ErrnoStatus(errno, "examining path " + QuotePath(path.path));
  if (!S_ISDIR(st.st_mode)) return FailedPrecondition("path " + QuotePath(path.path) + " is not a directory");
  common::VolumeMounts volume_mounts(options_.state_dir);
  Walk walk{.volume_mounts = &volume_mounts, .log = &options_.log};
  RemoveChildren(dir.get(), path.path, 0, walk);
  ReleaseSmbMappings(path);
  return walk.problems.Summary();
}

Status LinuxFilesystemBackend::CreateSymlink(const ConfinedPath& source, const ConfinedPath& link) {
  // The link's text is followed by whoever uses the link later, so it must not lead outside the roots (or link
  // target dirs) as far as it resolves today. A source that does not exist yet is accepted, as upstream does.
  auto resolved = common::OpenFollowing(policy_, source, "source_path", Access::kExamine);
  if (!resolved.ok() && resolved.status().code() != Code::kNotFound) return resolved.status();

  auto parent = common::OpenParent(policy_, link, "target_path", Access::kModify);
  if (!parent.ok()) {
    if (parent.status().code() == Code::kNotFound) {
      return NotFound("the parent directory of target_path " + QuotePath(link.path) + " does not exist");
    }
    return parent.status();
  }
  const Status exists = AlreadyExists("target_path " + QuotePath(link.path) + " already exists");
  if (parent->name.empty()) return exists;  // an allowed root
  if (::symlinkat(source.path.c_str(), parent->dir.get(), parent->name.c_str()) == 0) return Status::Ok();
  if (errno == EEXIST) return exists;
  return ErrnoStatus(errno, "creating symlink " + QuotePath(link.path));
}

StatusOr<bool> LinuxFilesystemBackend::IsSymlink(const ConfinedPath& path) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto parent, common::OpenParent(policy_, path, "path", Access::kExamine));
  struct statx stx;
  int flags = AT_SYMLINK_NOFOLLOW | (parent.name.empty() ? AT_EMPTY_PATH : 0);
  if (::statx(parent.dir.get(), parent.name.c_str(), flags, STATX_TYPE, &stx) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return NotFound("path " + QuotePath(path.path) + " does not exist");
    return ErrnoStatus(errno, "examining path " + QuotePath(path.path));
  }
  if (S_ISLNK(stx.stx_mode)) {
    // A link counts when its target exists; the target is resolved inside the roots (and link target dirs)
    // only, so a link planted to point elsewhere reveals nothing about what is there (it is refused).
    auto target = common::OpenFollowing(policy_, path, "path", Access::kExamine);
    if (target.ok()) return true;
    Code code = target.status().code();
    if (code == Code::kNotFound || code == Code::kFailedPrecondition) return false;  // dangling, or a loop
    return target.status();
  }
  // A mount point counts too, as upstream counts a volume mounted on a folder.
  return (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) != 0 && (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
}

std::unique_ptr<FilesystemBackend> MakeFilesystemBackend(common::PathPolicy policy, FilesystemOptions options) {
  return std::make_unique<LinuxFilesystemBackend>(std::move(policy), std::move(options));
}

}  // namespace csi_proxy::filesystem

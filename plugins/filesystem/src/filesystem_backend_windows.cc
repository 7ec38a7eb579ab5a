// The filesystem group on Windows: every path opened through common::OpenParent / OpenFollowing
// (confined_open_windows.h: handle-relative opens that never follow a reparse point by themselves), every change
// made on a handle (delete by disposition, symlinks by FSCTL_SET_REPARSE_POINT), and a removal walk that never
// follows a link and never enters a volume mount point: a forced removal deletes the mount point (the volume and
// its data stay), as Windows' own folder removal does.
#include <windows.h>
#include <winioctl.h>

#include <vector>

#include "confined_open_windows.h"
#include "filesystem_backend.h"
#include "removal_problems.h"
#include "smb_mapping_users.h"
#include "symlink_windows.h"
#include "text.h"
#include "win32_windows.h"

namespace csi_proxy::filesystem {
namespace {

using common::Access;
using common::ConfinedPath;
using common::EntryInfo;
using common::QuotePath;
using common::ReparsePoint;
using common::UniqueHandle;
using common::Win32Status;

// Deeper trees are not removed (each level holds a handle while the walk is inside it).
constexpr int kMaxDepth = 512;

// FileDispositionInfoEx (Windows 10 1607 and later); MinGW's header hides it behind a version test no
// _WIN32_WINNT value passes.
constexpr auto kFileDispositionInfoEx = static_cast<FILE_INFO_BY_HANDLE_CLASS>(21);

constexpr NTSTATUS kStatusObjectNameNotFound = static_cast<NTSTATUS>(0xC0000034);
constexpr NTSTATUS kStatusObjectPathNotFound = static_cast<NTSTATUS>(0xC000003A);
constexpr NTSTATUS kStatusDeletePending = static_cast<NTSTATUS>(0xC0000056);
constexpr NTSTATUS kStatusNoSuchFile = static_cast<NTSTATUS>(0xC000000F);

bool IsMissing(NTSTATUS status) {
  return status == kStatusObjectNameNotFound || status == kStatusObjectPathNotFound || status == kStatusDeletePending ||
         status == kStatusNoSuchFile;
}

// Marks an open entry for deletion: POSIX semantics where the file system has them (the name goes at once, so
// the directory above can be removed right after), else the classic disposition (the name goes when the last
// handle closes). A read-only file is removed too, as upstream's os.RemoveAll does.
DWORD DeleteByHandle(HANDLE handle) {
  FILE_DISPOSITION_INFO_EX ex{FILE_DISPOSITION_FLAG_DELETE | FILE_DISPOSITION_FLAG_POSIX_SEMANTICS |
                              FILE_DISPOSITION_FLAG_IGNORE_READONLY_ATTRIBUTE};
  if (::SetFileInformationByHandle(handle, kFileDispositionInfoEx, &ex, sizeof ex)) return 0;
  DWORD err = ::GetLastError();
  if (err != ERROR_INVALID_PARAMETER && err != ERROR_NOT_SUPPORTED && err != ERROR_INVALID_FUNCTION) return err;
  FILE_BASIC_INFO basic{};
  if (::GetFileInformationByHandleEx(handle, FileBasicInfo, &basic, sizeof basic) &&
      (basic.FileAttributes & FILE_ATTRIBUTE_READONLY) != 0) {
    basic.FileAttributes &= ~static_cast<DWORD>(FILE_ATTRIBUTE_READONLY);
    ::SetFileInformationByHandle(handle, FileBasicInfo, &basic, sizeof basic);
  }
  FILE_DISPOSITION_INFO classic{TRUE};
  return ::SetFileInformationByHandle(handle, FileDispositionInfo, &classic, sizeof classic) ? 0 : ::GetLastError();
}

// The names in a directory (without "." and ".."), read on a handle of its own.
StatusOr<std::vector<std::wstring>> ListNames(HANDLE dir, const std::string& shown) {
  UniqueHandle listing;
  NTSTATUS status =
      common::OpenBelow(dir, L"", FILE_LIST_DIRECTORY | FILE_READ_ATTRIBUTES, FILE_DIRECTORY_FILE, listing);
  if (status < 0) return common::NtStatusToStatus(status, "listing " + QuotePath(shown));
  std::vector<std::wstring> names;
  std::vector<unsigned char> buffer(64 * 1024);
  FILE_INFO_BY_HANDLE_CLASS kind = FileIdBothDirectoryRestartInfo;
  for (;;) {
    if (!::GetFileInformationByHandleEx(listing.get(), kind, buffer.data(), static_cast<DWORD>(buffer.size()))) {
      DWORD err = ::GetLastError();
      if (err == ERROR_NO_MORE_FILES) break;
      return Win32Status(err, "listing " + QuotePath(shown));
    }
    kind = FileIdBothDirectoryInfo;
    size_t at = 0;
    for (;;) {
      const auto* entry = reinterpret_cast<const FILE_ID_BOTH_DIR_INFO*>(buffer.data() + at);
      std::wstring name(entry->FileName, entry->FileNameLength / sizeof(wchar_t));
      if (name != L"." && name != L"..") names.push_back(std::move(name));
      if (entry->NextEntryOffset == 0) break;
      at += entry->NextEntryOffset;
    }
  }
  return names;
}

std::string Shown(const std::string& dir, const std::wstring& name) { return dir + "\\" + common::WideToUtf8(name); }

Status MountPointKept(const std::string& shown, const std::string& why) {
  return FailedPrecondition("not removed: " + QuotePath(shown) + " " + why);
}

// Removes a volume mount point as Windows removes one (the volume and its data stay; only the folder's link to
// it goes). DeleteVolumeMountPoint takes a path: it is built from the held handle of the folder's directory,
// which the walk holds without FILE_SHARE_DELETE, as every directory above it up to the one the request named.
Status DeleteMountPoint(HANDLE dir, const std::wstring& name, const std::string& shown) {
  CSI_PROXY_ASSIGN_OR_RETURN(std::wstring path, common::DosPathOf(dir, name));
  if (!::DeleteVolumeMountPointW((path + L"\\").c_str())) {
    return Win32Status(::GetLastError(), "removing the volume mount point " + QuotePath(shown));
  }
  return Status::Ok();
}

// A removal walk: what it could not remove, and the policy its checks report against.
struct Walk {
  RemovalProblems problems;
  const common::PathPolicy* policy = nullptr;
  const sdk::LogSink* log = nullptr;
};

void RemoveChildren(HANDLE dir, const std::string& shown, int depth, Walk& walk);

// Removes `name` in `dir` and, for a plain directory, everything below it. Links are removed, never followed;
// volume mount points are removed as mount points, never entered.
void RemoveNamed(HANDLE dir, const std::wstring& name, const std::string& shown, int depth, Walk& walk) {
  RemovalProblems& problems = walk.problems;
  for (int attempt = 0; attempt < 4; ++attempt) {
    // Held without FILE_SHARE_DELETE: while the walk is inside a directory, neither it nor one above it can be
    // renamed, so the paths DeleteMountPoint builds stay true.
    UniqueHandle entry;
    NTSTATUS status = common::OpenBelow(dir, name, DELETE | FILE_READ_ATTRIBUTES | FILE_WRITE_ATTRIBUTES, 0, entry,
                                        FILE_OPEN, FILE_SHARE_READ | FILE_SHARE_WRITE);
    if (IsMissing(status)) return;
    if (status < 0) return problems.Add(common::NtStatusToStatus(status, "opening " + QuotePath(shown)));
    auto info = common::ReadEntryInfo(entry.get(), shown);
    if (!info.ok()) return problems.Add(info.status());

    if (info->reparse && info->reparse->kind == ReparsePoint::Kind::kVolumeMountPoint) {
      entry.Reset();
      if (Status deleted = DeleteMountPoint(dir, name, shown); !deleted.ok()) return problems.Add(deleted);
      if (walk.log != nullptr && *walk.log) {
        (*walk.log)(sdk::LogLevel::kInfo, "removed the volume mount point " + QuotePath(shown) + " (volume " +
                                              common::WideToUtf8(common::ToWide(info->reparse->target)) +
                                              ", a forced Rmdir)");
      }
      continue;  // a plain empty directory now: removed on the next pass
    }
    if (!info->reparse) {
      // A plain entry must be where it was named; Wine's host symlinks are not, and removing through one would
      // remove its target.
      Status inside = common::CheckDirectlyInside(dir, entry.get(), *walk.policy, "path", shown);
      if (!inside.ok()) return problems.Add(MountPointKept(shown, "is reached through a link the system follows"));
    }
    if (info->is_directory() && !info->reparse) {
      size_t before = problems.count();
      RemoveChildren(entry.get(), shown, depth + 1, walk);
      if (problems.count() != before) return;  // something below stays, so this directory stays too
    }
    // Files, symlinks and junctions (the link itself), and directories emptied above.
    DWORD err = DeleteByHandle(entry.get());
    entry.Reset();
    if (err == 0) return;
    if (err == ERROR_DIR_NOT_EMPTY) continue;  // something was created meanwhile: another pass
    return problems.Add(Win32Status(err, "removing " + QuotePath(shown)));
  }
  problems.Add(Internal("removing " + QuotePath(shown) + ": it keeps changing while it is being removed"));
}

void RemoveChildren(HANDLE dir, const std::string& shown, int depth, Walk& walk) {
  if (depth > kMaxDepth) {
    return walk.problems.Add(FailedPrecondition("not removed: " + QuotePath(shown) + " is nested more than " +
                                                std::to_string(kMaxDepth) + " directories deep"));
  }
  auto names = ListNames(dir, shown);
  if (!names.ok()) return walk.problems.Add(names.status());
  for (const std::wstring& name : *names) RemoveNamed(dir, name, Shown(shown, name), depth, walk);
}

class WindowsFilesystemBackend final : public FilesystemBackend {
 public:
  WindowsFilesystemBackend(common::PathPolicy policy, FilesystemOptions options)
      : policy_(std::move(policy)), options_(std::move(options)) {}

  StatusOr<bool> PathExists(const ConfinedPath& path) override {
    auto parent = common::OpenParent(policy_, path, "path", Access::kExamine);
    if (!parent.ok()) {
      if (parent.status().code() == Code::kNotFound) return false;
      return parent.status();
    }
    if (parent->name.empty()) return true;  // an allowed root, and it opened
    UniqueHandle entry;
    NTSTATUS status = common::OpenBelow(parent->dir.get(), parent->name, FILE_READ_ATTRIBUTES, 0, entry);
    if (status >= 0) return true;
    if (IsMissing(status)) return false;
    return common::NtStatusToStatus(status, "examining path " + QuotePath(path.path));
  }

  Status MakeDirectories(const ConfinedPath& path) override {
    return common::OpenCreatingDirs(policy_, path, "path").status();
  }

  Status RemoveEntry(const ConfinedPath& path) override {
    CSI_PROXY_ASSIGN_OR_RETURN(auto parent, common::OpenParent(policy_, path, "path", Access::kModify));
    if (parent.name.empty()) return PermissionDenied("refusing to remove allowed root " + QuotePath(path.path));
    UniqueHandle entry;
    NTSTATUS status = common::OpenBelow(parent.dir.get(), parent.name,
                                        DELETE | FILE_READ_ATTRIBUTES | FILE_WRITE_ATTRIBUTES, 0, entry);
    if (IsMissing(status)) return NotFound("path " + QuotePath(path.path) + " does not exist");
    if (status < 0) return common::NtStatusToStatus(status, "removing path " + QuotePath(path.path));
    CSI_PROXY_ASSIGN_OR_RETURN(EntryInfo info, common::ReadEntryInfo(entry.get(), path.path));
    if (info.reparse && info.reparse->kind == ReparsePoint::Kind::kVolumeMountPoint) {
      return MountPointKept(path.path, "is a volume mount point (use force)");
    }
    if (!info.reparse) {
      CSI_PROXY_RETURN_IF_ERROR(common::CheckDirectlyInside(parent.dir.get(), entry.get(), policy_, "path", path.path));
    }
    // An open directory with a disposition set reports "not empty" here, not later.
    DWORD err = DeleteByHandle(entry.get());
    if (err == 0) {
      entry.Reset();  // the name goes with the last handle where POSIX semantics are missing
      ReleaseSmbMappings(path);
      return Status::Ok();
    }
    if (err == ERROR_DIR_NOT_EMPTY) {
      return FailedPrecondition("path " + QuotePath(path.path) + " is a directory that is not empty (use force)");
    }
    return Win32Status(err, "removing path " + QuotePath(path.path));
  }

  Status RemoveTree(const ConfinedPath& path) override {
    auto parent = common::OpenParent(policy_, path, "path", Access::kModify);
    if (!parent.ok() && parent.status().code() == Code::kNotFound) {
      ReleaseSmbMappings(path);  // gone already, perhaps with links the SMB group still counts
      return Status::Ok();
    }
    if (!parent.ok()) return parent.status();
    if (parent->name.empty()) return PermissionDenied("refusing to remove allowed root " + QuotePath(path.path));
    CSI_PROXY_ASSIGN_OR_RETURN(UniqueHandle pinned, common::PinDirectory(parent->dir.get(), path.path));
    Walk walk{.policy = &policy_, .log = &options_.log};
    RemoveNamed(pinned.get(), parent->name, path.path, 0, walk);
    ReleaseSmbMappings(path);
    return walk.problems.Summary();
  }

  Status RemoveContents(const ConfinedPath& path) override {
    CSI_PROXY_ASSIGN_OR_RETURN(auto dir, common::OpenFollowing(policy_, path, "path", Access::kModify));
    CSI_PROXY_ASSIGN_OR_RETURN(EntryInfo info, common::ReadEntryInfo(dir.get(), path.path));
    if (!info.is_directory()) return FailedPrecondition("path " + QuotePath(path.path) + " is not a directory");
    CSI_PROXY_ASSIGN_OR_RETURN(UniqueHandle pinned, common::PinDirectory(dir.get(), path.path));
    Walk walk{.policy = &policy_, .log = &options_.log};
    RemoveChildren(pinned.get(), path.path, 0, walk);
    ReleaseSmbMappings(path);
    return walk.problems.Summary();
  }

  Status CreateSymlink(const ConfinedPath& source, const ConfinedPath& link) override {
    // As on Linux: the source must not lead outside the roots as far as it resolves today; it need not exist.
    // Its kind decides the link's, as upstream's os.Symlink does: a directory symlink, unless the source is an
    // existing file (a source that does not exist yet gets a directory symlink, as upstream's first
    // `mklink /D` made every link).
    bool file_link = false;
    auto resolved = common::OpenFollowing(policy_, source, "source_path", Access::kExamine);
    if (resolved.ok()) {
      CSI_PROXY_ASSIGN_OR_RETURN(EntryInfo info, common::ReadEntryInfo(resolved->get(), source.path));
      file_link = !info.is_directory();
    } else if (resolved.status().code() != Code::kNotFound) {
      return resolved.status();
    }

    auto parent = common::OpenParent(policy_, link, "target_path", Access::kModify);
    if (!parent.ok()) {
      if (parent.status().code() == Code::kNotFound) {
        return NotFound("the parent directory of target_path " + QuotePath(link.path) + " does not exist");
      }
      return parent.status();
    }
    const Status exists = AlreadyExists("target_path " + QuotePath(link.path) + " already exists");
    if (parent->name.empty()) return exists;  // an allowed root
    Status made = common::MakeSymlinkAt(parent->dir.get(), parent->name, source.path, !file_link,
                                        "symlink " + QuotePath(link.path));
    return made.code() == Code::kAlreadyExists ? exists : made;
  }

  StatusOr<bool> IsSymlink(const ConfinedPath& path) override {
    CSI_PROXY_ASSIGN_OR_RETURN(auto parent, common::OpenParent(policy_, path, "path", Access::kExamine));
    UniqueHandle entry;
    HANDLE examined = parent.dir.get();
    if (!parent.name.empty()) {
      NTSTATUS status = common::OpenBelow(parent.dir.get(), parent.name, FILE_READ_ATTRIBUTES, 0, entry);
      if (IsMissing(status)) return NotFound("path " + QuotePath(path.path) + " does not exist");
      if (status < 0) return common::NtStatusToStatus(status, "examining path " + QuotePath(path.path));
      examined = entry.get();
    }
    CSI_PROXY_ASSIGN_OR_RETURN(EntryInfo info, common::ReadEntryInfo(examined, path.path));
    if (!info.reparse) {
      if (entry.valid()) {
        CSI_PROXY_RETURN_IF_ERROR(
            common::CheckDirectlyInside(parent.dir.get(), entry.get(), policy_, "path", path.path));
      }
      return false;
    }
    switch (info.reparse->kind) {
      case ReparsePoint::Kind::kVolumeMountPoint:
        return true;  // as upstream counts a volume mounted on a folder
      case ReparsePoint::Kind::kSymlink:
      case ReparsePoint::Kind::kJunction: {
        // A link counts when its target exists, resolved inside the roots (and link target dirs) only.
        auto target = common::OpenFollowing(policy_, path, "path", Access::kExamine);
        if (target.ok()) return true;
        Code code = target.status().code();
        if (code == Code::kNotFound || code == Code::kFailedPrecondition) return false;  // dangling, or a loop
        return target.status();
      }
      case ReparsePoint::Kind::kOther:
        break;
    }
    return false;
  }

 private:
  // After a removal: a mapping of the SMB group whose last local_path link went with it is unmapped, as on Linux.
  void ReleaseSmbMappings(const ConfinedPath& path) {
    common::SmbMappingUsers::ReleaseAfterRemoval(options_.state_dir, policy_, options_.log, path.path);
  }

  common::PathPolicy policy_;
  FilesystemOptions options_;
};

}  // namespace

std::unique_ptr<FilesystemBackend> MakeFilesystemBackend(common::PathPolicy policy, FilesystemOptions options) {
  return std::make_unique<WindowsFilesystemBackend>(std::move(policy), std::move(options));
}

}  // namespace csi_proxy::filesystem

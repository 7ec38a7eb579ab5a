// Opening request paths on Windows so that no reparse point (symlink, junction, volume mount point) can lead
// outside the allowed roots (path_policy.h): the Windows counterpart of confined_open_linux.h, with the same
// rules and error codes.
//
// Every path is walked one component at a time from a handle of its allowed root: each component is opened
// relative to the handle of the directory above it (NtCreateFile with RootDirectory, the native openat) with
// FILE_OPEN_REPARSE_POINT, so the system never follows a reparse point on its own. A reparse point met on the
// way is read (FSCTL_GET_REPARSE_POINT) and followed by this code only while it stays inside the roots, as a
// symlink is on Linux: a relative symlink's `..` may not climb above its root, an absolute symlink's or a
// junction's target must start with an allowed root (or, when only examining, a link target dir). A volume mount
// point is entered only when the mount manager lists it as a mount point of its volume at exactly this place
// (SetVolumeMountPoint made it); a junction planted to a volume's root is refused. Reparse points of other kinds
// that name something elsewhere are refused; the others (deduplicated or cloud files) are plain files here.
//
// A second check holds where the first cannot: every component that is not a reparse point must be, by its
// handle's final path (GetFinalPathNameByHandle), directly inside the directory it was opened from. Wine shows
// host symlinks as plain directories that it follows even with FILE_OPEN_REPARSE_POINT; this check refuses them
// (PERMISSION_DENIED), so nothing is ever reached through a link the system followed by itself.
//
// Error codes: NOT_FOUND when the path does not resolve, PERMISSION_DENIED when resolving would leave the roots,
// FAILED_PRECONDITION for link loops, INVALID_ARGUMENT for names the file system refuses, INTERNAL otherwise.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "csi_proxy/status.hpp"
#include "path_policy.h"
#include "reparse_data.h"
#include "win32_windows.h"

namespace csi_proxy::common {

// The directory that holds a path's last component.
struct OpenedParent {
  UniqueHandle dir;   // that directory (of the root itself when `name` is empty)
  std::wstring name;  // the last component; empty when the path is an allowed root
};

// What the caller does with what it opens; as in confined_open_linux.h.
enum class Access { kModify, kExamine };

// Opens the directory holding `path`'s last component; the last component itself is not looked at.
StatusOr<OpenedParent> OpenParent(const PathPolicy& policy, const ConfinedPath& path, std::string_view field,
                                  Access access = Access::kModify);

// Opens the object `path` names, following a final reparse point under the same rules.
StatusOr<UniqueHandle> OpenFollowing(const PathPolicy& policy, const ConfinedPath& path, std::string_view field,
                                     Access access = Access::kModify);

// Like OpenFollowing, but creates missing directories along the path, as mkdir -p. Components that come from a
// link's target are never created. FAILED_PRECONDITION when a component, or the path itself, is not a directory.
StatusOr<UniqueHandle> OpenCreatingDirs(const PathPolicy& policy, const ConfinedPath& path, std::string_view field);

// ---- The pieces the groups act with, on handles from the functions above.

// Opens `name` in the directory `dir` without following a reparse point (NtCreateFile relative to `dir`, with
// FILE_OPEN_REPARSE_POINT added to `options`). Returns the NTSTATUS; `out` holds the handle on success.
NTSTATUS OpenBelow(HANDLE dir, std::wstring_view name, ACCESS_MASK access, ULONG options, UniqueHandle& out,
                   ULONG disposition = FILE_OPEN, ULONG share = FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE);

// The attributes of an open object (FILE_ATTRIBUTE_*), and its reparse point if it is one.
struct EntryInfo {
  DWORD attributes = 0;
  std::optional<ReparsePoint> reparse;
  bool is_directory() const { return (attributes & FILE_ATTRIBUTE_DIRECTORY) != 0; }
};
StatusOr<EntryInfo> ReadEntryInfo(HANDLE handle, const std::string& shown);

// The path of an open object as the system resolved it (GetFinalPathNameByHandle, NT form:
// "\\Device\\HarddiskVolume1\\var\\lib\\kubelet").
StatusOr<std::wstring> FinalPath(HANDLE handle);

// PERMISSION_DENIED unless `child`, opened by one name below `parent`, is directly inside it (see the top).
Status CheckDirectlyInside(HANDLE parent, HANDLE child, const PathPolicy& policy, std::string_view field,
                           const std::string& path);

// `dir` opened again without FILE_SHARE_DELETE: while this handle is open, neither the directory nor one above it
// can be renamed, so a path built from it (DosPathOf) stays true while a call that takes only a path
// (SetVolumeMountPoint, DeleteVolumeMountPoint) runs. `shown` names the directory in messages.
StatusOr<UniqueHandle> PinDirectory(HANDLE dir, const std::string& shown);

// The DOS path of a directory and a name in it ("C:\\var\\lib\\kubelet\\x"), for the few Win32 calls that take
// only a path (DeleteVolumeMountPoint). `dir` is held open by the caller while the path is used.
StatusOr<std::wstring> DosPathOf(HANDLE dir, std::wstring_view name);

}  // namespace csi_proxy::common

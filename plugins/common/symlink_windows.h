// Symlinks made and read on handles, relative to the directory that holds them (confined_open_windows.h gives
// the directory): the filesystem group's CreateSymlink and the SMB group's local_path links (directory symlinks
// to a share's UNC path, as upstream makes them) are both made here, and the SMB mapping users read the links
// back here.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "csi_proxy/status.hpp"
#include "win32_windows.h"

namespace csi_proxy::common {

// What is at a name: nothing, a symlink (and its target), or something else.
struct EntryAt {
  bool exists = false;
  // A symlink's target as Win32 writes paths ("C:\x", "\\server\share\x\"), or its text when it is relative;
  // nullopt when what is there is not a symlink.
  std::optional<std::string> symlink_target;
};

// Looks at `name` in `dir` without following it. `shown` names it in messages.
StatusOr<EntryAt> ReadEntryAt(HANDLE dir, std::wstring_view name, const std::string& shown);

// Creates the symlink `name` in `dir` to the absolute path `target` ("C:\x" or "\\server\share\x\"): an empty
// directory (or, with `directory` false, file) made relative to `dir`, then given the reparse point with
// FSCTL_SET_REPARSE_POINT, as CreateSymbolicLink makes one. ALREADY_EXISTS when something is at the name;
// FAILED_PRECONDITION where the file system cannot hold symlinks or the process lacks
// SeCreateSymbolicLinkPrivilege; nothing half-made stays. `shown` names the link in messages ("symlink 'C:\x'").
Status MakeSymlinkAt(HANDLE dir, std::wstring_view name, std::string_view target, bool directory,
                     const std::string& shown);

}  // namespace csi_proxy::common

// Opening request paths on Linux so that symlinks cannot lead outside the allowed roots (path_policy.h).
//
// Every path is walked one component at a time from an O_PATH descriptor of its allowed root, with
// openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS) and O_NOFOLLOW, so the kernel never
// follows a link on its own. A symlink met on the way is followed by this code only while it stays inside the
// roots: a relative link's `..` may climb back towards, but never above, the root it started from; an absolute
// link's text must start with an allowed root (any of them) and is then walked beneath that root. Anything else
// is PERMISSION_DENIED. Working on held descriptors makes the walk immune to components being swapped for
// symlinks while it runs.
//
// Why not a single openat2(RESOLVE_BENEATH) from the root: it refuses every absolute symlink, including the ones
// CreateSymlink itself makes (pod volume dir -> stage dir) and links from the kubelet path into a working dir.
//
// Error codes of the Open* functions: NOT_FOUND when the path does not resolve (a component is missing or is
// not a directory, or the allowed root itself is missing), PERMISSION_DENIED when resolving would leave the
// roots, FAILED_PRECONDITION for symlink loops, INTERNAL for other OS errors (with the OS error text).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "csi_proxy/status.hpp"
#include "path_policy.h"
#include "unique_fd_linux.h"

namespace csi_proxy::common {

// openat2(2) with how = {flags | O_CLOEXEC, mode, resolve}; retries EINTR and EAGAIN (the kernel's answer to a
// concurrent rename during a RESOLVE_BENEATH walk). Returns the descriptor or -errno.
int Openat2(int dirfd, const char* path, int flags, uint64_t resolve, mode_t mode = 0);

// The directory that holds a path's last component.
struct OpenedParent {
  UniqueFd dir;      // O_PATH descriptor of that directory (of the root itself when `name` is empty)
  std::string name;  // the last component; empty when the path is an allowed root
};

// What the caller does with what it opens. Symlinks met on the way may lead into the policy's link target
// dirs only for kExamine: looking at something (lstat, existence), never changing anything there.
enum class Access { kModify, kExamine };

// Opens the directory holding `path`'s last component; the last component itself is not looked at, so the
// caller acts on it with *at() calls and AT_SYMLINK_NOFOLLOW. `field` names the request field in messages.
StatusOr<OpenedParent> OpenParent(const PathPolicy& policy, const ConfinedPath& path, std::string_view field,
                                  Access access = Access::kModify);

// Opens (O_PATH) the object `path` names, following a final symlink under the same rules.
StatusOr<UniqueFd> OpenFollowing(const PathPolicy& policy, const ConfinedPath& path, std::string_view field,
                                 Access access = Access::kModify);

// Like OpenFollowing, but creates missing directories along the path (mode 0755, less the umask), as mkdir -p.
// Components that come from a symlink's text are never created. FAILED_PRECONDITION when a component, or
// the path itself, exists and is not a directory.
StatusOr<UniqueFd> OpenCreatingDirs(const PathPolicy& policy, const ConfinedPath& path, std::string_view field);

}  // namespace csi_proxy::common

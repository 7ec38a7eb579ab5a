// Which host paths a request may name: the kubelet path and the admin's working dirs ("allowed roots").
//
// This is the lexical half of the rule, portable and free of system calls: a request path must be absolute,
// non-empty, free of NUL bytes and `..` components, and lie under a root component by component
// (`/var/lib/kubelet-evil` is not under `/var/lib/kubelet`). Symlinks are the other half; they are handled
// when the path is opened (confined_open_linux.h, confined_open_windows.h), never by looking at strings alone.
//
// Both systems' path syntaxes are here (PathSyntax), so each is unit-tested on Linux; a build uses its own OS's
// (kNativePathSyntax) unless told otherwise.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "csi_proxy/status.hpp"

namespace csi_proxy::common {

enum class PathSyntax {
  // '/'-separated, case-sensitive components: Linux.
  kPosix,
  // Drive-letter paths (`C:\var\lib\kubelet`), '\' or '/' as separators ('\' in normalized paths), components
  // compared case-insensitively (ASCII letters). Only `X:\...` is absolute: UNC (`\\server\share`), device
  // (`\\?\`, `\\.\`), drive-relative (`C:x`) and rooted (`\x`) paths are refused. Components that Win32 would
  // read differently from the file system are refused too: a ':' (alternate data streams), `<>"|?*` and control
  // characters, a trailing '.' or ' ' (Win32 strips them), and DOS device names (`NUL`, `COM1.txt`, ...).
  kWindows,
};

// The syntax of this build's OS.
#if defined(_WIN32)
inline constexpr PathSyntax kNativePathSyntax = PathSyntax::kWindows;
#else
inline constexpr PathSyntax kNativePathSyntax = PathSyntax::kPosix;
#endif

// A request path that passed the lexical check, split at the allowed root it lies under.
struct ConfinedPath {
  std::string path;      // normalized absolute path: no `.`, no empty components, no trailing slash
  std::string root;      // the allowed root it lies under (normalized); the longest one if roots nest
  std::string relative;  // the components below `root`, joined by the separator; empty when the path is the root

  bool is_root() const { return relative.empty(); }
};

// An absolute path split at the allowed root it starts with, without judging the rest. Used for the text of
// symlinks met while opening a path: their `..` components are resolved on the way, against real directories.
struct RootedText {
  std::string root;
  std::vector<std::string> rest;  // raw components after the root ("." and ".." kept, empty ones dropped)
};

class PathPolicy {
 public:
  // The roots are the kubelet path and the working dirs; empty entries are ignored, duplicates collapsed.
  // A root must be absolute, without `..`, and not "/" itself (that would allow everything).
  //
  // `link_target_dirs` are directories outside the roots that symlinks inside the roots may lead into when a
  // path is only examined (never changed), e.g. the SMB group's mount root that `local_path` links point at.
  // Request paths may not name them directly. Same rules as roots.
  static StatusOr<PathPolicy> Create(std::string_view kubelet_path, const std::vector<std::string>& working_dirs,
                                     const std::vector<std::string>& link_target_dirs = {},
                                     PathSyntax syntax = kNativePathSyntax);

  // The lexical check of one request path. `field` names the request field in messages ("path", "target_path").
  // INVALID_ARGUMENT for empty, relative, NUL-containing, `..`-containing or overlong paths; PERMISSION_DENIED
  // when the path is not under any allowed root. Messages quote the path and list the roots.
  StatusOr<ConfinedPath> Confine(std::string_view path, std::string_view field = "path") const;

  // Splits an absolute path (typically a symlink's text) at the longest allowed root it starts with, component
  // by component; nullopt when it starts with none. With `include_link_targets`, link target dirs count too.
  std::optional<RootedText> SplitAtRoot(std::string_view absolute, bool include_link_targets = false) const;

  // One key for every spelling of the same confined path, for per-path locks: the normalized path, in ASCII lower
  // case for the Windows syntax (whose components compare case-insensitively).
  std::string SameObjectKey(const ConfinedPath& path) const;

  // The components of a normalized path's part (ConfinedPath::relative, a link's relative text) in this syntax.
  std::vector<std::string> Split(std::string_view path) const;
  PathSyntax syntax() const { return syntax_; }

  // The allowed roots (normalized, in configuration order).
  std::vector<std::string> roots() const;
  // The link target dirs (normalized, without those that are also roots).
  std::vector<std::string> link_target_dirs() const;
  // "[/var/lib/kubelet, /var/lib/csi-driver]" for error messages.
  std::string RootsForMessage() const;
  // PERMISSION_DENIED for a path whose resolution (through symlinks or `..` in a symlink) would leave the roots.
  Status EscapeError(std::string_view field, std::string_view path, std::string_view how) const;

 private:
  struct Dir {
    std::string path;                // normalized
    std::vector<std::string> parts;  // the same, split into components
    bool link_target_only;           // a link target dir, not an allowed root
  };

  // Adds a root or link target dir after checking it; `kind` names it in messages.
  Status Add(std::string_view dir, bool link_target_only, const char* kind);
  // The longest entry of dirs_ whose components start `parts`; nullptr if none.
  const Dir* LongestDirOf(const std::vector<std::string>& parts, bool include_link_targets) const;

  std::vector<Dir> dirs_;
  PathSyntax syntax_ = PathSyntax::kPosix;
};

// Splits at '/', dropping empty components; "." and ".." are kept.
std::vector<std::string> SplitPath(std::string_view path);
// The same in a syntax: PathSyntax::kWindows splits at both '\' and '/'.
std::vector<std::string> SplitPath(std::string_view path, PathSyntax syntax);

}  // namespace csi_proxy::common

// Windows reparse point data (the REPARSE_DATA_BUFFER that FSCTL_GET_REPARSE_POINT returns and
// FSCTL_SET_REPARSE_POINT takes) read and written as bytes. Portable, so it is unit-tested on Linux; the Windows
// resolver (confined_open_windows.h) and the filesystem group's CreateSymlink use it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace csi_proxy::common {

inline constexpr uint32_t kReparseTagMountPoint = 0xA0000003;  // IO_REPARSE_TAG_MOUNT_POINT: junctions, mounts
inline constexpr uint32_t kReparseTagSymlink = 0xA000000C;     // IO_REPARSE_TAG_SYMLINK

// What a reparse point is.
struct ReparsePoint {
  enum class Kind {
    kSymlink,           // IO_REPARSE_TAG_SYMLINK
    kJunction,          // IO_REPARSE_TAG_MOUNT_POINT to a path
    kVolumeMountPoint,  // IO_REPARSE_TAG_MOUNT_POINT to a volume's root ("\??\Volume{GUID}\")
    kOther,             // any other tag (deduplication, cloud files, container layers, ...)
  };
  Kind kind = Kind::kOther;
  uint32_t tag = 0;
  // kSymlink and kJunction: the substitute name as a path: "C:\x" for an absolute one (without the "\??\" prefix
  // Windows stores), "\\server\share\x" for one to a UNC path ("\??\UNC\server\share\x"), or the relative text.
  // kVolumeMountPoint: the volume's name, "\\?\Volume{GUID}\".
  std::u16string target;
  bool relative = false;  // a symlink whose target is relative to the directory holding it

  // Whether the tag says the point names another object (IsReparseTagNameSurrogate).
  bool names_another_object() const { return (tag & 0x20000000u) != 0; }
};

// Parses FSCTL_GET_REPARSE_POINT's output; nullopt when it is malformed (too short, names out of bounds).
std::optional<ReparsePoint> ParseReparsePoint(std::span<const uint8_t> data);

// The data of a symlink to an absolute path ("C:\x") or a UNC path ("\\server\share\x"), as CreateSymbolicLink
// writes it: substitute name "\??\C:\x" or "\??\UNC\server\share\x", print name the path as given, flags 0.
std::vector<uint8_t> AbsoluteSymlinkData(std::u16string_view target);

}  // namespace csi_proxy::common

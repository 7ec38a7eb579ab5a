// FormatVolume's options, which upstream's API has no room for: csi-proxy's own fields appended to v1's and
// v2alpha1's FormatVolumeRequest (field numbers 2 and 3; proto3 clients that do not know them send nothing). A
// filesystem type from an allow-list, and mkfs options from an allow-list of flags whose values are checked too,
// so a request can tune the filesystem (block size, inode ratio, features, label) but never make mkfs read or
// write anything but the volume (mke2fs -d, mkfs.xfs -p, -d file=, -l logdev=) or overwrite what is there (-f).
// On Windows (ntfs, refs) the options are in-parameters of MSFT_Volume.Format instead, from an allow-list too.
// Pure checks, no I/O: the service calls them before anything runs.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "csi_proxy/status.hpp"

namespace csi_proxy::volume {

// What a FormatVolume request asks for beyond the volume.
struct FormatOptions {
  std::string fs_type;                    // empty: the group's default_fs_type; else IsSupportedFilesystem
  std::vector<std::string> mkfs_options;  // argv items: each flag, then its value as the next item
};

// OK when every item of `options` is an allowed flag for `fs_type` followed by an allowed value (when the flag
// takes one). INVALID_ARGUMENT naming the first refused flag or value and what is allowed instead.
Status CheckMkfsOptions(const std::string& fs_type, const std::vector<std::string>& options);

// The flags CheckMkfsOptions allows for `fs_type`, for messages and docs: "-b, -C, -E, ...".
std::string AllowedMkfsFlags(const std::string& fs_type);

// One in-parameter of MSFT_Volume.Format, by its documented name.
struct FormatParameter {
  std::string name;
  std::variant<bool, uint64_t, std::string> value;
};

// The options of a Windows file system ("ntfs", "refs") as MSFT_Volume.Format's in-parameters: each item is
// "Name=value", each name at most once, from an allow-list. ntfs: AllocationUnitSize (a power of two, 512 to
// 2097152), FileSystemLabel (up to 32 letters, digits, '.', '_' or '-'), Compress, ShortFileNameSupport and
// UseLargeFRS (true or false); refs: AllocationUnitSize (4096 or 65536), FileSystemLabel and SetIntegrityStreams.
// What would change how the format runs (Force, Full) or what it formats is not among them. INVALID_ARGUMENT
// naming the refused item and what is allowed.
StatusOr<std::vector<FormatParameter>> ParseFormatParameters(const std::string& fs_type,
                                                             const std::vector<std::string>& options);

}  // namespace csi_proxy::volume

// The one way plugins read a whole small file (state files, sysfs and procfs attributes): opened O_CLOEXEC, so
// the descriptor never leaks into a program spawned at the same moment by another thread (std::ifstream and
// fopen without "e" open without it; one such program reads iSCSI node records that hold CHAP secrets).
#pragma once

#include <fcntl.h>

#include <cstddef>
#include <optional>
#include <string>

#include "csi_proxy/status.hpp"

namespace csi_proxy::common {

inline constexpr size_t kDefaultMaxFileBytes = 1u << 20;

struct ReadFileOptions {
  int dir_fd = AT_FDCWD;      // `path` is relative to this directory (openat)
  bool no_follow = false;     // O_NOFOLLOW: a symlink in the last component is an error
  bool regular_only = false;  // anything but a regular file is an error (FAILED_PRECONDITION)
  size_t max_bytes = kDefaultMaxFileBytes;
};

// The whole file. Errors: the open's errno as ErrnoStatus (ENOENT NOT_FOUND, ...); a file longer than
// `max_bytes` is RESOURCE_EXHAUSTED.
StatusOr<std::string> ReadWholeFile(const std::string& path, const ReadFileOptions& options = {});

// The file's text without trailing newlines and blanks (as sysfs attributes end), or nullopt if it cannot be
// read.
std::optional<std::string> ReadTrimmedFile(const std::string& path, size_t max_bytes = kDefaultMaxFileBytes);

}  // namespace csi_proxy::common

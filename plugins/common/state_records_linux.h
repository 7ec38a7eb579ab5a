// Small records a group keeps under [host] state_dir, for the other group libraries and for its own next run.
//
// Groups are separate shared libraries with nothing in memory in common. Where one group must know what another
// did (which mount points the volume group made, which disks the disk group took offline, which local_path links
// point at an SMB mapping), the group that acts writes a record here and the other reads it. Records outlive the
// proxy, so the state survives a restart; a reader checks every record against the machine (the mount table, the
// link on disk) before it believes it, so a stale record costs nothing.
//
// Format: one file per record in a private directory (mode 0700, owned by this user, refused otherwise), named
// by a stable 64-bit hash of the record's key; `name=value` lines, the first being `key=<the key>` (values
// escape '%', '\n' and '\r' as %25, %0A, %0D). Every write is atomic: temporary file, fsync, rename, fsync of the
// directory. Readers that find no directory find no records. No request data ever names a file here: names are
// hashes, and a record whose key differs from the one asked for (a hash collision) is ignored.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "csi_proxy/status.hpp"
#include "unique_fd_linux.h"

namespace csi_proxy::common {

// The fields of one record; "key" is the record's key.
using RecordFields = std::map<std::string, std::string>;

// An exclusive lock (flock(2) on a lock file) shared by every thread, library and process that locks the same
// name in the same directory; released when the object goes away.
class RecordLock {
 public:
  RecordLock() = default;
  explicit RecordLock(UniqueFd fd) : fd_(std::move(fd)) {}

 private:
  UniqueFd fd_;
};

class StateRecords {
 public:
  // Records in `dir` (an absolute path; nothing is created until the first Put or Lock).
  explicit StateRecords(std::string dir) : dir_(std::move(dir)) {}

  const std::string& dir() const { return dir_; }

  // The record stored under `key`; nullopt when there is none.
  StatusOr<std::optional<RecordFields>> Get(std::string_view key) const;
  // Stores `fields` under `key` (replacing what was there); "key" is set to `key`. Creates the directory (0700,
  // missing parents 0755).
  Status Put(std::string_view key, RecordFields fields) const;
  // Removes the record of `key`; no record is success.
  Status Remove(std::string_view key) const;
  // Every record, in no particular order.
  StatusOr<std::vector<RecordFields>> List() const;
  // Takes the exclusive lock named `name` (any text), waiting for it. Creates the directory like Put.
  StatusOr<RecordLock> Lock(std::string_view name) const;

 private:
  // The directory, opened; an invalid descriptor (not an error) when it does not exist and `create` is false.
  StatusOr<UniqueFd> OpenDir(bool create) const;

  std::string dir_;
};

// The stable name of a record or lock file for `key`: 16 lowercase hex digits of FNV-1a 64.
std::string RecordFileName(std::string_view key);

// Writes `content` to `name` inside the directory `dir_fd` so that readers see either the old or the new file:
// a temporary file (O_EXCL, `mode`), write, fsync, rename over `name`, fsync of the directory.
Status WriteFileAtomically(int dir_fd, const std::string& name, const std::string& content, unsigned mode);

// mkdir -p: missing parents get 0755, the last component `last_mode`; existing directories are kept.
Status MakeDirectories(const std::string& path, unsigned last_mode);

}  // namespace csi_proxy::common

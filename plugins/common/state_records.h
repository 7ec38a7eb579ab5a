// Small records a group keeps under [host] state_dir, for the other group libraries and for its own next run.
//
// Groups are separate shared libraries with nothing in memory in common. Where one group must know what another
// did (which mount points the volume group made, which disks the disk group took offline, which local_path links
// point at an SMB mapping), the group that acts writes a record here and the other reads it. Records outlive the
// proxy, so the state survives a restart; a reader checks every record against the machine (the mount table, the
// link on disk) before it believes it, so a stale record costs nothing.
//
// Format: one file per record in a private directory, named by a stable 64-bit hash of the record's key;
// `name=value` lines, the first being `key=<the key>` (values escape '%', '\n' and '\r' as %25, %0A, %0D). Every
// write is atomic: a temporary file, flushed, renamed over the record. Readers that find no directory find no
// records. No request data ever names a file here: names are hashes, and a record whose key differs from the one
// asked for (a hash collision) is ignored. The directory, the writes and the locks are each system's own
// (state_records_linux.cc: mode 0700, owned by this user, flock(2); state_records_windows.cc: SYSTEM, Administrators
// and the owner only, LockFileEx); this header and state_records.cc are the part both share.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "csi_proxy/status.hpp"

namespace csi_proxy::common {

// The fields of one record; "key" is the record's key.
using RecordFields = std::map<std::string, std::string>;

// An exclusive lock on a lock file, shared by every thread, library and process that locks the same name in the
// same directory; released when the object goes away.
class RecordLock {
 public:
  RecordLock() = default;
  // `held` is what keeps the lock (the lock file, open and locked); the lock ends when it is destroyed.
  explicit RecordLock(std::shared_ptr<void> held) : held_(std::move(held)) {}
  RecordLock(RecordLock&&) = default;
  RecordLock& operator=(RecordLock&&) = default;
  RecordLock(const RecordLock&) = delete;
  RecordLock& operator=(const RecordLock&) = delete;

 private:
  std::shared_ptr<void> held_;
};

class StateRecords {
 public:
  // Records in `dir` (an absolute path; nothing is created until the first Put or Lock).
  explicit StateRecords(std::string dir) : dir_(std::move(dir)) {}

  const std::string& dir() const { return dir_; }

  // The record stored under `key`; nullopt when there is none.
  StatusOr<std::optional<RecordFields>> Get(std::string_view key) const;
  // Stores `fields` under `key` (replacing what was there); "key" is set to `key`. Creates the directory.
  Status Put(std::string_view key, RecordFields fields) const;
  // Removes the record of `key`; no record is success.
  Status Remove(std::string_view key) const;
  // Every record, in no particular order.
  StatusOr<std::vector<RecordFields>> List() const;
  // Takes the exclusive lock named `name` (any text), waiting for it. Creates the directory like Put.
  StatusOr<RecordLock> Lock(std::string_view name) const;

 private:
  std::string dir_;
};

// ---- The files, as both systems name and write them.

// The stable name of a record or lock file for `key`: 16 lowercase hex digits of FNV-1a 64.
std::string RecordFileName(std::string_view key);
// The file of the record `key` ("r-<hash>") and of the lock `name` (".lock-<hash>").
inline constexpr std::string_view kRecordFilePrefix = "r-";
inline std::string RecordFile(std::string_view key) { return std::string(kRecordFilePrefix) + RecordFileName(key); }
inline std::string LockFile(std::string_view name) { return ".lock-" + RecordFileName(name); }
// A record file larger than this is not read.
inline constexpr size_t kMaxRecordBytes = 64 * 1024;

// A record's text (fields must hold "key") and the fields of a text; lines without '=' are skipped.
std::string FormatRecord(const RecordFields& fields);
RecordFields ParseRecord(std::string_view text);

}  // namespace csi_proxy::common

// The files a root host takes code and settings from (group libraries, the configuration), the directories it
// keeps sockets and state in and the audit log it writes must not be changeable by anyone but root (or the host's
// own user): a library a non-root user can swap is root code execution. A check by path and a later open by the
// same path can be raced (a symlink flipped in between), so a file is opened once, through directories each
// checked as it is opened, checked once open, and then used only through that open file: the library loaded is
// the file checked, the configuration parsed is the text read from it. Development setups may opt out with
// --allow-untrusted-files. The walk is the system's (trusted_files_linux.cc; a Windows side goes beside it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "csi_proxy/status.hpp"

namespace csi_proxy::host {

// An open file that passed the checks (or was opened without them under --allow-untrusted-files). Move-only;
// closes the file when it goes.
class TrustedFile {
 public:
  TrustedFile() = default;
  TrustedFile(std::string path, intptr_t handle) : path_(std::move(path)), handle_(handle) {}
  TrustedFile(TrustedFile&& other) noexcept;
  TrustedFile& operator=(TrustedFile&& other) noexcept;
  TrustedFile(const TrustedFile&) = delete;
  TrustedFile& operator=(const TrustedFile&) = delete;
  ~TrustedFile();

  // The path it was opened by, for messages.
  const std::string& path() const { return path_; }
  // The system's handle of the open file (a file descriptor on Linux).
  intptr_t handle() const { return handle_; }
  bool is_open() const { return handle_ != -1; }
  // Gives the handle up to the caller, who closes it.
  intptr_t Release();

  // The file's content from its start, through the open file; RESOURCE_EXHAUSTED beyond `max_bytes`.
  StatusOr<std::string> ReadAll(size_t max_bytes) const;

 private:
  std::string path_;
  intptr_t handle_ = -1;
};

// Opens `path` to read: every directory on the way (symlinks followed through directories that passed) and the
// file itself must be owned by root or the host's own user and be writable by nobody else (a directory with the
// sticky bit, as /tmp, may be writable by others when it is root's; on a read-only mount, modes do not matter).
// PERMISSION_DENIED naming the file or the directory and what is wrong with it; NOT_FOUND when it does not exist.
// `what` names the file in messages ("the library", "the configuration file").
StatusOr<TrustedFile> OpenTrustedFile(const std::string& path, const std::string& what);

// Opens the file `path` to append to (the audit log), created 0600 when missing, with the same checks on its
// directories and on the file; a FIFO or a character device (a pipe to a collector, /dev/null) is accepted.
StatusOr<TrustedFile> OpenTrustedAppendFile(const std::string& path, const std::string& what);

// The same checks on the directory `path` and every directory above it; for a directory that does not exist yet,
// on the directories above it that do (the host creates the rest).
Status CheckTrustedDirectory(const std::string& path, const std::string& what);

// Turns the checks off (the --allow-untrusted-files flag): the functions above then open and pass whatever is
// there.
void AllowUntrustedFiles();
bool UntrustedFilesAllowed();

// The system's part, in trusted_files_<system>.cc: closes a file's handle.
void CloseFileHandle(intptr_t handle);

// The end of every refusal: why it matters and the development switch.
inline constexpr const char* kUntrustedHint =
    "; only root may be able to change what a root host runs (--allow-untrusted-files turns this check off for "
    "development)";

}  // namespace csi_proxy::host

// See trusted_files.h. The walk starts at "/" and opens each component with O_PATH | O_NOFOLLOW relative to the
// directory before it, checking it with fstat(2) once open; a symlink is read through the descriptor that found
// it and its target walked the same way. What is checked is what is used: a directory or link swapped after its
// check is never the one the next step opens.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <utility>
#include <vector>

#include "config/trusted_files.h"

namespace csi_proxy::host {
namespace {

constexpr int kMaxSymlinks = 40;  // as the kernel's own path walk (ELOOP)

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

std::string Mode(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// Why the open file `fd` (whose fstat is `st`) is not to be trusted, or "" when it is.
std::string Untrusted(int fd, const struct stat& st) {
  if (st.st_uid != 0 && st.st_uid != geteuid()) return "is owned by uid " + std::to_string(st.st_uid);
  bool writable_by_others = (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
  // In a sticky directory owned by root (/tmp) nobody can rename or remove another user's entry; the entries met
  // further on are checked in their turn.
  if (S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX) && st.st_uid == 0) writable_by_others = false;
  // On a read-only mount nobody writes, whatever the mode says (a Kubernetes ConfigMap volume's directory is 0777,
  // mounted read-only into the container).
  struct statvfs fs {};
  if (writable_by_others && fstatvfs(fd, &fs) == 0 && (fs.f_flag & ST_RDONLY) != 0) writable_by_others = false;
  if (writable_by_others) return "is writable by its group or by others (mode " + Mode(st.st_mode) + ")";
  return "";
}

std::deque<std::string> Components(const std::string& path) {
  std::deque<std::string> out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    std::string part = path.substr(start, end - start);
    if (!part.empty() && part != ".") out.push_back(std::move(part));
    start = end + 1;
  }
  return out;
}

std::string Child(const std::string& dir, const std::string& name) { return (dir == "/" ? "" : dir) + "/" + name; }

std::string ErrnoText(int err) { return std::strerror(err); }

// Where a walk ended: the checked directory holding the last component, and that component's name ("" when the
// path named the directory itself).
struct Walked {
  Fd dir;
  std::string dir_path;  // as walked (symlinks resolved), for messages
  std::string name;
  bool missing = false;  // a directory on the way does not exist (only with Walk's `stop_at_missing`)
};

// Walks `path` down to its last component (into it as well when `into_last`), checking every directory on the way.
// With `stop_at_missing`, a directory that does not exist ends the walk (missing) instead of failing it.
StatusOr<Walked> Walk(const std::string& path, const std::string& what, bool into_last, bool stop_at_missing) {
  if (path.empty()) return InvalidArgument(what + " has an empty path");
  // A relative path (--config on the command line) is walked from the root through the working directory.
  std::error_code ec;
  const std::string absolute = path[0] == '/' ? path : std::filesystem::absolute(path, ec).string();
  if (ec) return FailedPrecondition("cannot resolve " + what + " " + path + ": " + ec.message());
  struct Dir {
    Fd fd;
    std::string path;
  };
  const bool check = !UntrustedFilesAllowed();
  std::vector<Dir> walked;
  {
    Fd root(open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
    struct stat st {};
    if (root.get() < 0 || fstat(root.get(), &st) != 0) {
      return Internal("cannot open / to check " + what + " " + path + ": " + ErrnoText(errno));
    }
    if (std::string why = Untrusted(root.get(), st); check && !why.empty()) {
      return PermissionDenied(what + " " + path + " lies in /, which " + why + kUntrustedHint);
    }
    walked.push_back({std::move(root), "/"});
  }
  std::deque<std::string> rest = Components(absolute);
  int links = 0;
  while (!rest.empty()) {
    std::string name = std::move(rest.front());
    rest.pop_front();
    if (name == "..") {
      if (walked.size() > 1) walked.pop_back();
      continue;
    }
    const bool last = rest.empty();
    const std::string shown = Child(walked.back().path, name);
    Fd entry(openat(walked.back().fd.get(), name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (entry.get() < 0) {
      int err = errno;
      if (err == ENOENT && last && !into_last) return Walked{std::move(walked.back().fd), walked.back().path, name};
      if (err == ENOENT && stop_at_missing) {
        return Walked{std::move(walked.back().fd), walked.back().path, name, /*missing=*/true};
      }
      if (err == ENOENT) return NotFound("cannot open " + what + " " + path + ": " + shown + " does not exist");
      return FailedPrecondition("cannot open " + shown + " (on the way to " + what + " " + path +
                                "): " + ErrnoText(err));
    }
    struct stat st {};
    if (fstat(entry.get(), &st) != 0) {
      return FailedPrecondition("cannot examine " + shown + " (on the way to " + what + " " + path +
                                "): " + ErrnoText(errno));
    }
    if (S_ISLNK(st.st_mode)) {
      // A link found in a checked directory was put there by a trusted user; where it leads is walked in turn.
      if (++links > kMaxSymlinks) {
        return FailedPrecondition(what + " " + path + ": too many symbolic links on the way (" + shown + ")");
      }
      char target[4096];
      ssize_t n = readlinkat(entry.get(), "", target, sizeof target);
      if (n <= 0 || static_cast<size_t>(n) >= sizeof target) {
        return FailedPrecondition("cannot read the symbolic link " + shown + " (on the way to " + what + " " + path +
                                  ")");
      }
      std::string to(target, static_cast<size_t>(n));
      std::deque<std::string> parts = Components(to);
      rest.insert(rest.begin(), parts.begin(), parts.end());
      if (to[0] == '/') walked.resize(1);
      continue;
    }
    if (last && !into_last) return Walked{std::move(walked.back().fd), walked.back().path, name};
    if (!S_ISDIR(st.st_mode)) return FailedPrecondition(what + " " + path + ": " + shown + " is not a directory");
    if (std::string why = Untrusted(entry.get(), st); check && !why.empty()) {
      return PermissionDenied(what + " " + path + (last ? " " + why : " lies in " + shown + ", which " + why) +
                              "; anyone who can write there can replace it" + kUntrustedHint);
    }
    walked.push_back({std::move(entry), shown});
  }
  return Walked{std::move(walked.back().fd), walked.back().path, ""};
}

Status CheckOpenFile(int fd, const std::string& path, const std::string& what, bool regular_only) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return FailedPrecondition("cannot examine " + what + " " + path + ": " + ErrnoText(errno));
  bool kind_ok = S_ISREG(st.st_mode) || (!regular_only && (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)));
  if (!kind_ok) {
    return FailedPrecondition(what + " " + path + " is not a " + (regular_only ? "regular file" : "file or a FIFO"));
  }
  if (UntrustedFilesAllowed()) return Status::Ok();
  if (std::string why = Untrusted(fd, st); !why.empty()) {
    return PermissionDenied(what + " " + path + " " + why + kUntrustedHint);
  }
  return Status::Ok();
}

}  // namespace

void CloseFileHandle(intptr_t handle) { close(static_cast<int>(handle)); }

StatusOr<std::string> TrustedFile::ReadAll(size_t max_bytes) const {
  std::string text;
  char buf[8192];
  for (off_t at = 0;;) {
    ssize_t n = pread(static_cast<int>(handle_), buf, sizeof buf, at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return FailedPrecondition("cannot read " + path_ + ": " + ErrnoText(errno));
    if (n == 0) return text;
    text.append(buf, static_cast<size_t>(n));
    at += n;
    if (text.size() > max_bytes) {
      return Status(Code::kResourceExhausted, path_ + " is larger than " + std::to_string(max_bytes) + " bytes");
    }
  }
}

StatusOr<TrustedFile> OpenTrustedFile(const std::string& path, const std::string& what) {
  CSI_PROXY_ASSIGN_OR_RETURN(Walked walked, Walk(path, what, /*into_last=*/false, /*stop_at_missing=*/false));
  if (walked.name.empty()) return FailedPrecondition(what + " " + path + " is a directory");
  // O_NONBLOCK: a FIFO put there must not hang the open; anything but a regular file is refused below.
  int fd = openat(walked.dir.get(), walked.name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) return NotFound("cannot open " + what + " " + path + ": it does not exist");
    return FailedPrecondition("cannot open " + what + " " + path + ": " + ErrnoText(err) +
                              (err == ELOOP ? " (it was replaced by a symbolic link while it was opened)" : ""));
  }
  TrustedFile file(path, fd);
  CSI_PROXY_RETURN_IF_ERROR(CheckOpenFile(fd, path, what, /*regular_only=*/true));
  return file;
}

StatusOr<TrustedFile> OpenTrustedAppendFile(const std::string& path, const std::string& what) {
  CSI_PROXY_ASSIGN_OR_RETURN(Walked walked, Walk(path, what, /*into_last=*/false, /*stop_at_missing=*/false));
  if (walked.name.empty()) return FailedPrecondition(what + " " + path + " is a directory");
  // O_NONBLOCK: opening a FIFO nobody reads fails at once (ENXIO) instead of hanging the start; the writer waits
  // for a full FIFO with poll(2), so that it can always be stopped.
  int fd = openat(walked.dir.get(), walked.name.c_str(),
                  O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0600);
  if (fd < 0) {
    int err = errno;
    return FailedPrecondition("cannot open " + what + " " + path + ": " + ErrnoText(err) +
                              (err == ENXIO ? " (a FIFO that no process reads)" : "") +
                              (err == ELOOP ? " (it is a symbolic link)" : ""));
  }
  TrustedFile file(path, fd);
  CSI_PROXY_RETURN_IF_ERROR(CheckOpenFile(fd, path, what, /*regular_only=*/false));
  return file;
}

Status CheckTrustedDirectory(const std::string& path, const std::string& what) {
  if (UntrustedFilesAllowed()) return Status::Ok();
  CSI_PROXY_ASSIGN_OR_RETURN(Walked walked, Walk(path, what, /*into_last=*/true, /*stop_at_missing=*/true));
  (void)walked;  // every directory that exists on the way passed
  return Status::Ok();
}

}  // namespace csi_proxy::host

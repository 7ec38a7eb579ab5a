// The Linux side of the state records; see state_records_linux.h.
#include "state_records_linux.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string_view>

#include "errno_linux.h"
#include "read_file_linux.h"
#include "unique_fd_linux.h"

namespace csi_proxy::common {
namespace {

// A record file of this directory, read without following links; nullopt when missing.
StatusOr<std::optional<RecordFields>> ReadRecord(int dir_fd, const std::string& name, const std::string& dir) {
  auto text =
      ReadWholeFile(name, {.dir_fd = dir_fd, .no_follow = true, .regular_only = true, .max_bytes = kMaxRecordBytes});
  if (!text.ok()) {
    if (text.status().code() == Code::kNotFound) return std::optional<RecordFields>();
    return Internal("cannot read the record " + dir + "/" + name + ": " + text.status().message());
  }
  return std::optional<RecordFields>(ParseRecord(*text));
}

// The directory `dir`, opened; an invalid descriptor (not an error) when it does not exist and `create` is false.
StatusOr<UniqueFd> OpenDir(const std::string& dir, bool create) {
  if (dir.empty() || dir[0] != '/') return Internal("the records directory " + dir + " is not an absolute path");
  if (create) CSI_PROXY_RETURN_IF_ERROR(MakeDirectories(dir, 0700));
  UniqueFd fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT && !create) return UniqueFd();
    return Internal(ErrnoMessage("cannot open the records directory " + dir, errno));
  }
  // Records decide what the groups unmount and refuse: only a directory nobody else can write is believed.
  struct stat st {};
  if (fstat(fd.get(), &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 022) != 0) {
    return PermissionDenied("the records directory " + dir +
                            " must be owned by this process's user and writable only by it");
  }
  return fd;
}

}  // namespace

Status MakeDirectories(const std::string& path, unsigned last_mode) {
  size_t pos = 1;
  for (;;) {
    size_t slash = path.find('/', pos);
    std::string part = path.substr(0, slash);
    bool last = slash == std::string::npos;
    if (!part.empty() && mkdir(part.c_str(), last ? last_mode : 0755) != 0 && errno != EEXIST) {
      return Internal(ErrnoMessage("cannot create " + part, errno));
    }
    if (last) return Status::Ok();
    pos = slash + 1;
  }
}

Status WriteFileAtomically(int dir_fd, const std::string& name, const std::string& content, unsigned mode) {
  std::random_device rd;
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    tmp = "." + name + ".tmp." + std::to_string(rd());
    fd = openat(dir_fd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0 && errno != EEXIST) return Internal(ErrnoMessage("cannot create a temporary file for " + name, errno));
  }
  if (fd < 0) return Internal("cannot create a temporary file for " + name);
  auto fail = [&](const std::string& what) {
    int err = errno;
    close(fd);
    unlinkat(dir_fd, tmp.c_str(), 0);
    return Internal(ErrnoMessage(what + " " + name, err));
  };
  // The umask may have narrowed `mode` at creation; state files must be exactly `mode`.
  if (fchmod(fd, mode) != 0) return fail("cannot set the mode of");
  size_t off = 0;
  while (off < content.size()) {
    ssize_t n = write(fd, content.data() + off, content.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail("cannot write");
    off += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) return fail("cannot fsync");
  if (close(fd) != 0) {
    int err = errno;
    unlinkat(dir_fd, tmp.c_str(), 0);
    return Internal(ErrnoMessage("cannot close " + name, err));
  }
  if (renameat(dir_fd, tmp.c_str(), dir_fd, name.c_str()) != 0) {
    int err = errno;
    unlinkat(dir_fd, tmp.c_str(), 0);
    return Internal(ErrnoMessage("cannot rename the new " + name + " into place", err));
  }
  if (fsync(dir_fd) != 0) return Internal(ErrnoMessage("cannot fsync the directory of " + name, errno));
  return Status::Ok();
}

StatusOr<std::optional<RecordFields>> StateRecords::Get(std::string_view key) const {
  CSI_PROXY_ASSIGN_OR_RETURN(auto dir, OpenDir(dir_, false));
  if (!dir.valid()) return std::optional<RecordFields>();
  CSI_PROXY_ASSIGN_OR_RETURN(auto record, ReadRecord(dir.get(), RecordFile(key), dir_));
  if (!record || record->count("key") == 0 || (*record)["key"] != key) return std::optional<RecordFields>();
  return record;
}

Status StateRecords::Put(std::string_view key, RecordFields fields) const {
  CSI_PROXY_ASSIGN_OR_RETURN(auto dir, OpenDir(dir_, true));
  fields["key"] = std::string(key);
  return WriteFileAtomically(dir.get(), RecordFile(key), FormatRecord(fields), 0600);
}

Status StateRecords::Remove(std::string_view key) const {
  CSI_PROXY_ASSIGN_OR_RETURN(auto dir, OpenDir(dir_, false));
  if (!dir.valid()) return Status::Ok();
  const std::string name = RecordFile(key);
  // Only the record of this very key goes (a colliding key's record stays).
  CSI_PROXY_ASSIGN_OR_RETURN(auto record, ReadRecord(dir.get(), name, dir_));
  if (!record || (*record)["key"] != key) return Status::Ok();
  if (unlinkat(dir.get(), name.c_str(), 0) != 0 && errno != ENOENT) {
    return Internal(ErrnoMessage("cannot remove the record " + dir_ + "/" + name, errno));
  }
  if (fsync(dir.get()) != 0) return Internal(ErrnoMessage("cannot fsync " + dir_, errno));
  return Status::Ok();
}

StatusOr<std::vector<RecordFields>> StateRecords::List() const {
  std::vector<RecordFields> records;
  CSI_PROXY_ASSIGN_OR_RETURN(auto dir, OpenDir(dir_, false));
  if (!dir.valid()) return records;
  int copy = fcntl(dir.get(), F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return Internal(ErrnoMessage("cannot list " + dir_, errno));
  DIR* d = fdopendir(copy);
  if (d == nullptr) {
    close(copy);
    return Internal(ErrnoMessage("cannot list " + dir_, errno));
  }
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    if (std::string_view(e->d_name).substr(0, kRecordFilePrefix.size()) == kRecordFilePrefix)
      names.emplace_back(e->d_name);
  }
  closedir(d);
  for (const auto& name : names) {
    CSI_PROXY_ASSIGN_OR_RETURN(auto record, ReadRecord(dir.get(), name, dir_));
    if (record && record->count("key") != 0) records.push_back(std::move(*record));
  }
  return records;
}

StatusOr<RecordLock> StateRecords::Lock(std::string_view name) const {
  CSI_PROXY_ASSIGN_OR_RETURN(auto dir, OpenDir(dir_, true));
  const std::string file = LockFile(name);
  UniqueFd fd(openat(dir.get(), file.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) return Internal(ErrnoMessage("cannot open the lock " + dir_ + "/" + file, errno));
  while (flock(fd.get(), LOCK_EX) != 0) {
    if (errno != EINTR) return Internal(ErrnoMessage("cannot lock " + dir_ + "/" + file, errno));
  }
  return RecordLock(std::make_shared<UniqueFd>(std::move(fd)));
}

}  // namespace csi_proxy::common

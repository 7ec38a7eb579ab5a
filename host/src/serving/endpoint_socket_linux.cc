// See endpoint_socket.h: Unix socket files, probed with connect() before one is replaced.
#include "serving/endpoint_socket.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <vector>

#include "config/system_accounts.h"
#include "config/trusted_files.h"

namespace csi_proxy::host {
namespace {

std::string Errno() { return std::strerror(errno); }

bool FillAddress(const std::string& path, sockaddr_un& addr) {
  std::memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return false;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return true;
}

// Binds and listens on `path`; returns the listening fd (non-blocking, close-on-exec).
StatusOr<int> ListenUnixSocket(const std::string& path, uint32_t mode, gid_t group) {
  sockaddr_un addr;
  if (!FillAddress(path, addr)) return InvalidArgument("socket path is too long: " + path);

  struct stat st;
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return FailedPrecondition(path + " exists and is not a socket; refusing to replace it");
    }
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (probe < 0) return Internal("socket: " + Errno());
    int rc = connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    int connect_errno = errno;
    close(probe);
    if (rc == 0) {
      return FailedPrecondition("endpoint " + path + " is busy: another process is serving it");
    }
    if (connect_errno != ECONNREFUSED) {
      return FailedPrecondition("cannot tell whether " + path + " is in use: " + std::strerror(connect_errno));
    }
    if (unlink(path.c_str()) != 0) return Internal("cannot remove stale socket " + path + ": " + Errno());
  }

  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Internal("socket: " + Errno());
  // The file is created with the process umask (at most 0755 for root's usual 022): no one else can connect
  // before the chmod below widens it to the configured mode.
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    Status s = Internal("cannot bind " + path + ": " + Errno());
    close(fd);
    return s;
  }
  if (group != static_cast<gid_t>(-1) && chown(path.c_str(), static_cast<uid_t>(-1), group) != 0) {
    Status s = Internal("cannot set the group of " + path + ": " + Errno());
    close(fd);
    unlink(path.c_str());
    return s;
  }
  if (chmod(path.c_str(), mode) != 0 || listen(fd, 128) != 0) {
    Status s = Internal("cannot set up " + path + ": " + Errno());
    close(fd);
    unlink(path.c_str());
    return s;
  }
  return fd;
}

}  // namespace

StatusOr<SocketAccess> SocketAccessOf(const HostConfig& config) {
  SocketAccess access;
  access.mode = config.socket_mode;
  if (!config.socket_group.empty()) {
    auto gid = ResolveGroup(config.socket_group);
    if (!gid.ok()) return gid.status().WithContext("socket_group");
    access.group = *gid;
  }
  return access;
}

SocketAccess AdminSocketAccess() { return SocketAccess{0600, std::nullopt}; }

Status RequireNotServed(const std::string& path) {
  sockaddr_un addr;
  struct stat st;
  if (!FillAddress(path, addr) || lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) return Status::Ok();
  int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (probe < 0) return Internal("socket: " + Errno());
  int rc = connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  close(probe);
  if (rc == 0) return FailedPrecondition("endpoint " + path + " is busy: another process is serving it");
  return Status::Ok();
}

Status LockDirectory(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return Internal("cannot create " + dir + ": " + Errno());
  std::string path = dir + "/.csi-proxy.lock";
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Internal("cannot open " + path + ": " + Errno());
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    Status s = errno == EWOULDBLOCK ? FailedPrecondition("another csi-proxy uses the state directory " + dir)
                                    : Internal("cannot lock " + path + ": " + Errno());
    close(fd);
    return s;
  }
  return Status::Ok();  // the descriptor stays open, and locked, until the process exits
}

StatusOr<std::unique_ptr<ListeningSocket>> ListeningSocket::Listen(const std::string& path,
                                                                   const SocketAccess& access) {
  CSI_PROXY_ASSIGN_OR_RETURN(
      int fd,
      ListenUnixSocket(path, access.mode, access.group ? static_cast<gid_t>(*access.group) : static_cast<gid_t>(-1)));
  return std::unique_ptr<ListeningSocket>(new ListeningSocket(path, fd));
}

void ListeningSocket::Close() {
  if (handle_ < 0) return;
  close(static_cast<int>(handle_));
  unlink(path_.c_str());
  handle_ = -1;
}

Status CheckEndpointDirectory(const HostConfig& config) {
  CSI_PROXY_RETURN_IF_ERROR(CheckTrustedDirectory(config.endpoint_dir, "endpoint_dir"));
  std::error_code ec;
  if (std::filesystem::is_directory(config.endpoint_dir, ec)) return Status::Ok();
  std::filesystem::path parent = std::filesystem::path(config.endpoint_dir).parent_path();
  if (!std::filesystem::is_directory(parent, ec)) {
    return FailedPrecondition("endpoint_dir " + config.endpoint_dir + " cannot be created: " + parent.string() +
                              " does not exist");
  }
  return Status::Ok();
}

Status CreateEndpointDirectory(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return Internal("cannot create endpoint_dir " + dir + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace csi_proxy::host

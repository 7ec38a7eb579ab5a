// The place an endpoint listens at, as the operating system names it: a Unix socket file on Linux
// (endpoint_socket_linux.cc), a named pipe on Windows (endpoint_socket_windows.cc). A socket another process still
// serves is never taken over; one a crashed run left behind is replaced. Also the host's other claims on the
// machine: its state directory's lock and the endpoint directory.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "config/config.h"
#include "csi_proxy/status.hpp"

namespace csi_proxy::host {

// Who may connect: on Linux the socket file's mode and group ([host] socket_mode and socket_group); on Windows the
// pipe's security descriptor ([host] pipe_sddl).
struct SocketAccess {
  uint32_t mode = 0660;
  std::optional<uint32_t> group;  // a gid; none leaves the group the file is created with
  std::string sddl;               // Windows
};

// The endpoints' access as `config` sets it; an error names the key.
StatusOr<SocketAccess> SocketAccessOf(const HostConfig& config);

// The admin socket's: its owner only on Linux (root); SYSTEM and Administrators on Windows.
SocketAccess AdminSocketAccess();

class ListeningSocket {
 public:
  // Listens at `path` (non-blocking, close-on-exec). FAILED_PRECONDITION naming it ("endpoint <path> is busy:
  // another process is serving it") when another process accepts on it, or when something else is there.
  static StatusOr<std::unique_ptr<ListeningSocket>> Listen(const std::string& path, const SocketAccess& access);
  ~ListeningSocket() { Close(); }
  ListeningSocket(const ListeningSocket&) = delete;
  ListeningSocket& operator=(const ListeningSocket&) = delete;

  // Stops listening and removes the name, so that clients see the endpoint go away. Connections already
  // accepted stay. Idempotent.
  void Close();

  const std::string& path() const { return path_; }
  // What the accept loop waits on: the listening socket's fd on Linux; on Windows the pipe's listener
  // (endpoint_socket_windows.h).
  intptr_t native_handle() const { return handle_; }

 private:
  ListeningSocket(std::string path, intptr_t handle) : path_(std::move(path)), handle_(handle) {}
  std::string path_;
  intptr_t handle_ = -1;
};

// Fails with FAILED_PRECONDITION ("endpoint <path> is busy: another process is serving it") when a socket at
// `path` accepts connections; any other state (absent, stale, not a socket) passes.
Status RequireNotServed(const std::string& path);

// Takes an exclusive lock on `dir` (created if missing) for the life of the process, so that two hosts never share
// state. Fails with FAILED_PRECONDITION when another process holds it.
Status LockDirectory(const std::string& dir);

// endpoint_dir is a trusted directory, or can be created (its parent exists); on Windows it is the pipe
// namespace \\.\pipe. A start checks it; so does --check-config.
Status CheckEndpointDirectory(const HostConfig& config);

// Creates the endpoint directory `dir` (0755) when it does not exist.
Status CreateEndpointDirectory(const std::string& dir);

}  // namespace csi_proxy::host

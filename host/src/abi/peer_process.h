// The process at the other end of a connection, pinned when the connection is accepted so that it is never
// confused with a later process of the same pid (on Linux a pidfd from SO_PEERPIDFD, Linux 6.5 and later:
// peer_process_linux.cc; on Windows a handle of the pipe's client process: peer_process_windows.cc). The credentials a
// call is checked against are those the connecting process had when it connected; a socket passed to, or inherited by,
// another process carries them along. With [host] check_caller_process the host asks, for every call, whether the
// connecting process still runs with them, so that a connection left behind by a process that exited or changed its
// user is refused.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "abi/peer_credentials.h"

namespace csi_proxy::host {

class PeerProcess {
 public:
  // Whether this system can pin the peer of a connection.
  static bool Supported();
  // The peer of the connected socket `socket`, pinned; null when the system cannot pin it. On Windows `socket` is
  // a handle of the pipe client's process, opened when the client was identified, which the PeerProcess takes over.
  static std::shared_ptr<const PeerProcess> Of(intptr_t socket);

  ~PeerProcess();
  PeerProcess(const PeerProcess&) = delete;
  PeerProcess& operator=(const PeerProcess&) = delete;

  // nullopt while the pinned process runs with the uid, gid and supplementary groups of `connected` (what it
  // connected with; on Windows its token's user SID and enabled groups); otherwise why the connection is no longer
  // its own ("the process that connected (pid 42) has exited", "... now runs as uid 1000"), for the refusal.
  std::optional<std::string> Changed(const PeerCredentials& connected) const;

 private:
  explicit PeerProcess(intptr_t handle) : handle_(handle) {}
  intptr_t handle_;
};

}  // namespace csi_proxy::host

// Who is at the other end of a connection, as the listener learned it when it accepted the connection: on Linux
// from SO_PEERCRED and SO_PEERGROUPS (serving/listeners_linux.cc). The authorization lists, the audit log, the
// metrics and the library (call_peer_credentials) read it. A Windows listener fills the process id, and its
// token's user and group SIDs go beside the POSIX ids here, so that every reader takes them from the same place.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace csi_proxy::host {

class PeerProcess;  // abi/peer_process.h

struct PeerCredentials {
  int64_t pid = -1;
  int64_t uid = -1;  // -1: unknown, which no authorization list admits
  int64_t gid = -1;
  std::vector<uint32_t> groups;  // supplementary gids (SO_PEERGROUPS), as at connect time
  // The connecting process, pinned at accept, with [host] check_caller_process; null otherwise.
  std::shared_ptr<const PeerProcess> process;
};

}  // namespace csi_proxy::host

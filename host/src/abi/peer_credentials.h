// Who is at the other end of a connection, as the listener learned it when it accepted the connection: on Linux
// from SO_PEERCRED and SO_PEERGROUPS (serving/listeners_linux.cc), on Windows the pipe client's process id and its
// token's user and group SIDs (serving/listeners_windows.cc). The authorization lists, the audit log, the metrics
// and the library (call_peer_credentials) read it; how an account in a list is matched against it is the
// system's (peer_credentials_<system>.cc).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/system_accounts.h"

namespace csi_proxy::host {

class PeerProcess;  // abi/peer_process.h

struct PeerCredentials {
  int64_t pid = -1;
  int64_t uid = -1;  // -1: unknown, which no authorization list admits
  int64_t gid = -1;
  std::vector<uint32_t> groups;  // supplementary gids (SO_PEERGROUPS), as at connect time
  // Windows: the SIDs of the token's user and of its enabled groups ("S-1-5-18"); empty: unknown, which no
  // authorization list admits.
  std::string user_sid;
  std::vector<std::string> group_sids;
  // The connecting process, pinned at accept, with [host] check_caller_process; null otherwise.
  std::shared_ptr<const PeerProcess> process;
};

// Whether the caller's own account is in `accounts`: its uid; on Windows its user SID.
bool PeerUserIn(const std::vector<AccountId>& accounts, const PeerCredentials& peer);

// Whether one of its groups is: its gid or a supplementary gid; on Windows one of its group SIDs.
bool PeerGroupIn(const std::vector<AccountId>& accounts, const PeerCredentials& peer);

// The caller for messages: "uid 1000 (gid 1000)", "user S-1-5-21-...-1001", "a caller without known credentials".
std::string PeerText(const PeerCredentials& peer);

}  // namespace csi_proxy::host

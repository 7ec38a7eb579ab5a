// The credentials of each connection's peer on one endpoint, recorded when the connection is accepted and read by
// the router for every call (gRPC tells a call only the connection it came on).
#pragma once

#include <mutex>
#include <string>
#include <unordered_map>

#include "abi/peer_credentials.h"

namespace csi_proxy::host {

// Peer credentials of the connections of one endpoint, by the name gRPC gives their calls' peer (GrpcPeerName:
// "fd:<n>" on Linux). A name that comes back (a new connection got a closed one's fd) takes the new credentials.
class PeerTable {
 public:
  void Set(const std::string& grpc_peer, PeerCredentials creds);
  // The credentials recorded for `grpc_peer`; unknown ones (uid -1) when none are.
  PeerCredentials Get(const std::string& grpc_peer) const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, PeerCredentials> by_peer_;
};

}  // namespace csi_proxy::host

// The credentials of each connection's peer on one endpoint, recorded when the connection is accepted and read by
// the router for every call (gRPC tells a call only the connection it came on).
#pragma once

#include <map>
#include <mutex>
#include <string>

#include "abi/call_handle.h"

namespace csi_proxy::host {

// Peer credentials of the connections of one endpoint, by the fd gRPC names them with ("fd:<n>").
class PeerTable {
 public:
  void Set(int fd, PeerCredentials creds);
  PeerCredentials Get(const std::string& grpc_peer) const;

 private:
  mutable std::mutex mu_;
  std::map<int, PeerCredentials> by_fd_;
};

}  // namespace csi_proxy::host

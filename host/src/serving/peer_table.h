// The connections of one endpoint, by the name gRPC gives their calls' peer: who connected (recorded when the
// connection is accepted) and its streams. The router, health and reflection read it for every stream (gRPC tells
// a stream only the connection it came on).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "serving/stream_limits.h"

namespace csi_proxy::host {

// By GrpcPeerName ("fd:<n>" on Linux). A name that comes back (a new connection got a closed one's fd) takes the
// new connection.
class PeerTable {
 public:
  void Set(const std::string& grpc_peer, std::shared_ptr<PeerConnection> conn);
  // The connection recorded for `grpc_peer`; one with unknown credentials (uid -1) when none is.
  std::shared_ptr<PeerConnection> Get(const std::string& grpc_peer) const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<PeerConnection>> by_peer_;
};

}  // namespace csi_proxy::host

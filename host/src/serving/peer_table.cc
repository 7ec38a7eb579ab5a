// See peer_table.h.
#include "serving/peer_table.h"

namespace csi_proxy::host {

void PeerTable::Set(const std::string& grpc_peer, PeerCredentials creds) {
  std::lock_guard lock(mu_);
  by_peer_[grpc_peer] = std::move(creds);
}

PeerCredentials PeerTable::Get(const std::string& grpc_peer) const {
  std::lock_guard lock(mu_);
  auto it = by_peer_.find(grpc_peer);
  return it == by_peer_.end() ? PeerCredentials{} : it->second;
}

}  // namespace csi_proxy::host

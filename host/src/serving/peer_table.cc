// See peer_table.h.
#include "serving/peer_table.h"

namespace csi_proxy::host {

void PeerTable::Set(const std::string& grpc_peer, std::shared_ptr<PeerConnection> conn) {
  std::lock_guard lock(mu_);
  by_peer_[grpc_peer] = std::move(conn);
}

std::shared_ptr<PeerConnection> PeerTable::Get(const std::string& grpc_peer) const {
  {
    std::lock_guard lock(mu_);
    auto it = by_peer_.find(grpc_peer);
    if (it != by_peer_.end()) return it->second;
  }
  // Counted together, and admitted by no authorization list.
  static const auto unknown = std::make_shared<PeerConnection>(PeerCredentials{});
  return unknown;
}

}  // namespace csi_proxy::host

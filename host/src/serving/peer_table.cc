// See peer_table.h.
#include "serving/peer_table.h"

#include <cstdlib>

namespace csi_proxy::host {

void PeerTable::Set(int fd, PeerCredentials creds) {
  std::lock_guard lock(mu_);
  by_fd_[fd] = creds;
}

PeerCredentials PeerTable::Get(const std::string& grpc_peer) const {
  if (grpc_peer.rfind("fd:", 0) != 0) return {};
  int fd = std::atoi(grpc_peer.c_str() + 3);
  std::lock_guard lock(mu_);
  auto it = by_fd_.find(fd);
  return it == by_fd_.end() ? PeerCredentials{} : it->second;
}

}  // namespace csi_proxy::host

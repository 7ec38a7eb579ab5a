// See peer_credentials.h: a caller is its uid, its primary gid and its supplementary gids.
#include <algorithm>

#include "abi/peer_credentials.h"

namespace csi_proxy::host {
namespace {

bool Holds(const std::vector<AccountId>& accounts, int64_t id) {
  return id >= 0 && std::find(accounts.begin(), accounts.end(), id) != accounts.end();
}

}  // namespace

bool PeerUserIn(const std::vector<AccountId>& accounts, const PeerCredentials& peer) {
  return Holds(accounts, peer.uid);
}

bool PeerGroupIn(const std::vector<AccountId>& accounts, const PeerCredentials& peer) {
  if (Holds(accounts, peer.gid)) return true;
  return std::any_of(peer.groups.begin(), peer.groups.end(), [&](uint32_t g) { return Holds(accounts, g); });
}

std::string PeerText(const PeerCredentials& peer) {
  if (peer.uid < 0) return "a caller without known credentials";
  return "uid " + std::to_string(peer.uid) + " (gid " + std::to_string(peer.gid) + ")";
}

}  // namespace csi_proxy::host

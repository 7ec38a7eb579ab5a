// See peer_credentials.h: a caller is the SID of its token's user and those of its enabled groups.
#include <algorithm>

#include "abi/peer_credentials.h"

namespace csi_proxy::host {

bool PeerUserIn(const std::vector<AccountId>& accounts, const PeerCredentials& peer) {
  return !peer.user_sid.empty() && std::find(accounts.begin(), accounts.end(), peer.user_sid) != accounts.end();
}

bool PeerGroupIn(const std::vector<AccountId>& accounts, const PeerCredentials& peer) {
  if (peer.user_sid.empty()) return false;
  return std::any_of(peer.group_sids.begin(), peer.group_sids.end(), [&](const std::string& sid) {
    return std::find(accounts.begin(), accounts.end(), sid) != accounts.end();
  });
}

std::string PeerText(const PeerCredentials& peer) {
  if (peer.user_sid.empty()) return "a caller without known credentials";
  return "user " + peer.user_sid;
}

}  // namespace csi_proxy::host

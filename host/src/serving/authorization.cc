// See authorization.h.
#include "serving/authorization.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "abi/line_budget.h"
#include "abi/peer_process.h"

namespace csi_proxy::host {
namespace {

bool UidIn(const std::optional<std::vector<AccountId>>& uids, const PeerCredentials& peer) {
  return uids && PeerUserIn(*uids, peer);
}

// The primary gid or any supplementary one (on Windows: any group SID of the caller's token).
bool GidIn(const std::optional<std::vector<AccountId>>& gids, const PeerCredentials& peer) {
  return gids && PeerGroupIn(*gids, peer);
}

}  // namespace

std::shared_ptr<const Authorization> Authorization::Of(std::string group, const AccessLists& lists) {
  if (!lists.any()) return nullptr;
  return std::shared_ptr<const Authorization>(new Authorization(std::move(group), lists));
}

std::optional<std::string> Authorization::Check(const PeerCredentials& peer, std::string_view method,
                                                const MethodHandler& handler) const {
  // The lists judge the process that connected: with check_caller_process, only while it still runs as it did.
  if (peer.process) {
    if (auto changed = peer.process->Changed(peer)) {
      return PeerText(peer) + " may not call " + std::string(method) + " of group '" + group_ + "': " + *changed;
    }
  }
  if (UidIn(lists_.allowed_uids, peer) || GidIn(lists_.allowed_gids, peer)) return std::nullopt;
  bool read_only_caller = UidIn(lists_.read_only_uids, peer) || GidIn(lists_.read_only_gids, peer);
  if (read_only_caller && handler.read_only()) return std::nullopt;
  std::string why = PeerText(peer) + " may not call " + std::string(method) + " of group '" + group_ + "': ";
  if (read_only_caller) {
    why += "the method changes the node, and the caller is only in read_only_uids or read_only_gids";
  } else if (handler.read_only()) {
    why += "it is not in allowed_uids, allowed_gids, read_only_uids or read_only_gids";
  } else {
    why += "it is not in allowed_uids or allowed_gids";
  }
  return why;
}

bool Authorization::Names(const PeerCredentials& peer) const {
  return UidIn(lists_.allowed_uids, peer) || GidIn(lists_.allowed_gids, peer) || UidIn(lists_.read_only_uids, peer) ||
         GidIn(lists_.read_only_gids, peer);
}

std::optional<std::string> Authorization::CheckHostService(const PeerCredentials& peer,
                                                           std::string_view service) const {
  if (peer.process) {
    if (auto changed = peer.process->Changed(peer)) {
      return PeerText(peer) + " may not use " + std::string(service) + " on the endpoints of group '" + group_ +
             "': " + *changed;
    }
  }
  if (Names(peer)) return std::nullopt;
  return PeerText(peer) + " may not use " + std::string(service) + " on the endpoints of group '" + group_ +
         "': it is not in allowed_uids, allowed_gids, read_only_uids or read_only_gids";
}

bool SameAuthorization(const std::shared_ptr<const Authorization>& a, const std::shared_ptr<const Authorization>& b) {
  if (!a || !b) return !a && !b;
  return a->lists() == b->lists();
}

void LogRefusal(const PeerCredentials& peer, const std::string& why) {
  static LineBudget budget(1, std::chrono::seconds(10));
  uint64_t unlogged = 0;
  if (!budget.Allow(PeerText(peer), unlogged)) return;
  if (unlogged == 0) {
    spdlog::warn("refused a call: {} (pid {})", why, peer.pid);
  } else {
    spdlog::warn("refused a call: {} (pid {}); {} more refusals of this uid were not logged", why, peer.pid, unlogged);
  }
}

}  // namespace csi_proxy::host

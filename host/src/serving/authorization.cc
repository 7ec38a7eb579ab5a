// See authorization.h.
#include "serving/authorization.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>

namespace csi_proxy::host {
namespace {

bool Holds(const std::optional<std::vector<uint32_t>>& list, int64_t id) {
  return list && id >= 0 && std::find(list->begin(), list->end(), id) != list->end();
}

bool UidIn(const std::optional<std::vector<uint32_t>>& uids, const PeerCredentials& peer) {
  return Holds(uids, peer.uid);
}

// The primary gid or any supplementary one.
bool GidIn(const std::optional<std::vector<uint32_t>>& gids, const PeerCredentials& peer) {
  if (Holds(gids, peer.gid)) return true;
  return std::any_of(peer.groups.begin(), peer.groups.end(), [&](uint32_t g) { return Holds(gids, g); });
}

std::string Caller(const PeerCredentials& peer) {
  if (peer.uid < 0) return "a caller without known credentials";
  return "uid " + std::to_string(peer.uid) + " (gid " + std::to_string(peer.gid) + ")";
}

}  // namespace

std::shared_ptr<const Authorization> Authorization::Of(std::string group, const AccessLists& lists) {
  if (!lists.any()) return nullptr;
  return std::shared_ptr<const Authorization>(new Authorization(std::move(group), lists));
}

std::optional<std::string> Authorization::Check(const PeerCredentials& peer, std::string_view method,
                                                const MethodHandler& handler) const {
  if (UidIn(lists_.allowed_uids, peer) || GidIn(lists_.allowed_gids, peer)) return std::nullopt;
  bool read_only_caller = UidIn(lists_.read_only_uids, peer) || GidIn(lists_.read_only_gids, peer);
  if (read_only_caller && handler.read_only()) return std::nullopt;
  std::string why = Caller(peer) + " may not call " + std::string(method) + " of group '" + group_ + "': ";
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
  if (Names(peer)) return std::nullopt;
  return Caller(peer) + " may not use " + std::string(service) + " on the endpoints of group '" + group_ +
         "': it is not in allowed_uids, allowed_gids, read_only_uids or read_only_gids";
}

bool SameAuthorization(const std::shared_ptr<const Authorization>& a, const std::shared_ptr<const Authorization>& b) {
  if (!a || !b) return !a && !b;
  return a->lists() == b->lists();
}

void LogRefusal(const PeerCredentials& peer, const std::string& why) {
  struct Quiet {
    std::chrono::steady_clock::time_point last;
    uint64_t unlogged = 0;
  };
  static std::mutex mu;
  static std::map<int64_t, Quiet> by_uid;  // guarded by mu
  constexpr auto kEvery = std::chrono::seconds(10);
  constexpr size_t kMaxUids = 4096;  // callers are few; forget them all rather than grow without bound

  auto now = std::chrono::steady_clock::now();
  uint64_t unlogged = 0;
  {
    std::lock_guard lock(mu);
    if (by_uid.size() >= kMaxUids && !by_uid.count(peer.uid)) by_uid.clear();
    auto [it, fresh] = by_uid.try_emplace(peer.uid);
    if (!fresh && now - it->second.last < kEvery) {
      ++it->second.unlogged;
      return;
    }
    unlogged = it->second.unlogged;
    it->second = {now, 0};
  }
  if (unlogged == 0) {
    spdlog::warn("refused a call: {} (pid {})", why, peer.pid);
  } else {
    spdlog::warn("refused a call: {} (pid {}); {} more refusals of this uid were not logged", why, peer.pid, unlogged);
  }
}

}  // namespace csi_proxy::host

// Who may call a group's methods: the caller's uid, primary gid and supplementary gids (recorded per connection
// from SO_PEERCRED and SO_PEERGROUPS; on Windows its token's user and group SIDs) against the group's allowed_*
// and read_only_* lists. The router checks
// every call after the method lookup and before dispatch; a refused call never reaches the library.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "abi/call_handle.h"
#include "abi/endpoint_registry.h"
#include "config/access_lists.h"

namespace csi_proxy::host {

// The policy of one group, shared by its endpoints' bindings. With no list at all the group is open to every
// caller the socket admits (Of returns null). Once one list applies, the lists are the whole truth (a list not
// given is empty) and root is a caller like any other: it passes only when listed.
class Authorization {
 public:
  // `group` is the [groups.<name>] table, for messages. Null when no list applies.
  static std::shared_ptr<const Authorization> Of(std::string group, const AccessLists& lists);

  // Empty when `peer` may call `method` (handled by `handler`); otherwise why not, for the client and the log.
  std::optional<std::string> Check(const PeerCredentials& peer, std::string_view method,
                                   const MethodHandler& handler) const;

  // Whether any of the four lists holds `peer` (its uid, or its primary or a supplementary gid).
  bool Names(const PeerCredentials& peer) const;

  // Empty when `peer` may use the endpoint's own services (grpc.health.v1.Health and server reflection, named by
  // `service`): when it may call at least one method of the group, that is when any of the four lists holds it.
  std::optional<std::string> CheckHostService(const PeerCredentials& peer, std::string_view service) const;

  const AccessLists& lists() const { return lists_; }

 private:
  Authorization(std::string group, AccessLists lists) : group_(std::move(group)), lists_(std::move(lists)) {}

  const std::string group_;
  const AccessLists lists_;
};

// Whether two bindings would answer every call alike (both null counts as alike).
bool SameAuthorization(const std::shared_ptr<const Authorization>& a, const std::shared_ptr<const Authorization>& b);

// Logs a refusal at warn level, at most once per caller every ten seconds (with the count of those not logged), so a
// caller that keeps trying cannot flood the log.
void LogRefusal(const PeerCredentials& peer, const std::string& why);

}  // namespace csi_proxy::host

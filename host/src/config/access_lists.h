// Who may call: the allowed_* and read_only_* lists of uids and gids (on Windows: of the SIDs of the caller's user
// and of its groups), as [host] and each [groups.<name>] table give them. Read by the configuration, enforced by
// serving/authorization.h.
#pragma once

#include <optional>
#include <vector>

#include "config/system_accounts.h"

namespace csi_proxy::host {

// The four lists as one table of the configuration file gives them; a list that is not there is nullopt.
struct AccessLists {
  std::optional<std::vector<AccountId>> allowed_uids;
  std::optional<std::vector<AccountId>> allowed_gids;
  std::optional<std::vector<AccountId>> read_only_uids;
  std::optional<std::vector<AccountId>> read_only_gids;

  bool any() const { return allowed_uids || allowed_gids || read_only_uids || read_only_gids; }
  bool operator==(const AccessLists&) const = default;
};

// The lists that apply to a group: its table's, as a whole, when the table gives any of the four (a list it does
// not give is then empty, whatever [host] says); otherwise [host]'s. Key by key would let a group table that
// says `allowed_uids = []` ("nobody") still admit everyone in [host]'s allowed_gids.
AccessLists MergeAccessLists(const AccessLists& host, const AccessLists& group);

}  // namespace csi_proxy::host

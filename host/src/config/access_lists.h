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

// The lists a group's table gives replace, key by key, those of [host]; the others come from [host].
AccessLists MergeAccessLists(const AccessLists& host, const AccessLists& group);

}  // namespace csi_proxy::host

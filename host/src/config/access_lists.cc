// See access_lists.h.
#include "config/access_lists.h"

namespace csi_proxy::host {

AccessLists MergeAccessLists(const AccessLists& host, const AccessLists& group) {
  AccessLists out = host;
  if (group.allowed_uids) out.allowed_uids = group.allowed_uids;
  if (group.allowed_gids) out.allowed_gids = group.allowed_gids;
  if (group.read_only_uids) out.read_only_uids = group.read_only_uids;
  if (group.read_only_gids) out.read_only_gids = group.read_only_gids;
  return out;
}

}  // namespace csi_proxy::host

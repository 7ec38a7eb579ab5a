// See access_lists.h.
#include "config/access_lists.h"

namespace csi_proxy::host {

AccessLists MergeAccessLists(const AccessLists& host, const AccessLists& group) { return group.any() ? group : host; }

}  // namespace csi_proxy::host

// The system's users and groups by name: the configuration names callers (allowed_uids, read_only_gids, ...) and
// the endpoints' socket group by name or by number, resolved when the configuration is read.
#pragma once

#include <cstdint>
#include <string>

#include "csi_proxy/status.hpp"

namespace csi_proxy::host {

// The uid of the user `name`; NOT_FOUND when there is none.
StatusOr<uint32_t> ResolveUser(const std::string& name);

// The gid of a group name or a numeric gid: INVALID_ARGUMENT for a number out of range, NOT_FOUND for a name the
// system does not know.
StatusOr<uint32_t> ResolveGroup(const std::string& name_or_gid);

}  // namespace csi_proxy::host

// An OS call's errno as message text and as a gRPC status, the same way in every group.
#pragma once

#include <string>
#include <string_view>

#include "csi_proxy/status.hpp"

namespace csi_proxy::common {

// strerror(errno) with a prefix: "open /dev/loop3: Device or resource busy".
std::string ErrnoMessage(std::string_view what, int err);

// "what: <strerror>" with a gRPC code chosen from errno: ENOENT NOT_FOUND, EEXIST ALREADY_EXISTS,
// ENOTDIR/EISDIR/ENOTEMPTY/EBUSY/EROFS FAILED_PRECONDITION, EPERM/EACCES PERMISSION_DENIED,
// ENAMETOOLONG INVALID_ARGUMENT, anything else INTERNAL.
Status ErrnoStatus(int err, const std::string& what);

}  // namespace csi_proxy::common

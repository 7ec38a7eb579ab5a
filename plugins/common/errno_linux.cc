// errno as text and status; see errno_linux.h.
#include "errno_linux.h"

#include <cerrno>
#include <cstring>

namespace csi_proxy::common {

std::string ErrnoMessage(std::string_view what, int err) { return std::string(what) + ": " + std::strerror(err); }

Status ErrnoStatus(int err, const std::string& what) {
  std::string message = ErrnoMessage(what, err);
  switch (err) {
    case ENOENT:
      return NotFound(std::move(message));
    case EEXIST:
      return AlreadyExists(std::move(message));
    case ENOTDIR:
    case EISDIR:
    case ENOTEMPTY:
    case EBUSY:
    case EROFS:
      return FailedPrecondition(std::move(message));
    case EPERM:
    case EACCES:
      return PermissionDenied(std::move(message));
    case ENAMETOOLONG:
      return InvalidArgument(std::move(message));
    default:
      return Internal(std::move(message));
  }
}

}  // namespace csi_proxy::common

// See privileges.h: a Windows runner would confine itself with a restricted token and a job object
// (docs/windows.md); neither is built, so asking for it fails rather than running unconfined.
#include "isolation/privileges.h"

namespace csi_proxy::host {

Status ApplyGroupPrivileges(const GroupPrivileges&, pid_t) {
  return Unimplemented("isolating a group's privileges is not built on Windows (docs/windows.md)");
}

bool SanitizerBuildRelaxesPrivileges() { return false; }

}  // namespace csi_proxy::host

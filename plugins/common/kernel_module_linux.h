// Making a kernel feature that lives in a module available before a group uses it (cifs for SMB, iscsi_tcp for
// iSCSI).
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace csi_proxy::common {

// Whether `present()` holds, loading `module` with modprobe when it does not yet and the running kernel could
// load it at all (it has module support and a `<module>.ko` in its modules.dep). nullopt when the feature is
// there; otherwise why not, as a clause for a message ("modprobe cifs failed: ...").
std::optional<std::string> LoadKernelModule(const std::string& module, const std::function<bool()>& present);

}  // namespace csi_proxy::common

// Turns a service name from a request into the systemd unit it means, or refuses it. This is the only gate
// between request data and the service manager, so it is deliberately strict.
#pragma once

#include <string>
#include <string_view>

#include "csi_proxy/status.hpp"

namespace csi_proxy::system {

// systemd's limit for a unit name (UNIT_NAME_MAX minus the terminating NUL).
inline constexpr size_t kMaxUnitNameLength = 255;

// Accepts a service unit name and returns it canonical:
//  - characters: ASCII letters, digits, ':', '_', '.', '-', one '@' (template instance), and '\' only as a
//    systemd escape "\xHH"; not starting with '.', '-' or '@';
//  - "<name>" without a unit-type suffix becomes "<name>.service"; "<name>.service" stays; any other unit type
//    (".socket", ".target", ...) is refused, because this API manages services only;
//  - a template without an instance ("getty@.service") is refused: it cannot be started or stopped;
//  - at most kMaxUnitNameLength characters, suffix included.
// Anything else is INVALID_ARGUMENT with a message that shows the offending name safely quoted.
StatusOr<std::string> CanonicalServiceUnit(std::string_view name);

}  // namespace csi_proxy::system

// Turns a service name from a request into the service it means (a systemd unit on Linux, a Service Control
// Manager key name on Windows), or refuses it. This is the only gate between request data and the service
// manager, so it is deliberately strict. Both systems' rules are portable code, unit-tested on Linux.
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

// The Service Control Manager's limit for a service (key) name.
inline constexpr size_t kMaxWindowsServiceNameLength = 256;

// Accepts a Windows service's key name (what `sc.exe query <name>` takes, not its display name) and returns it
// canonical, in ASCII lower case: the SCM compares names case-insensitively, so allow-lists, refusals and locks
// must too.
//  - characters: ASCII letters, digits, ' ', '_', '-', '.', '$' (SQL Server's "MSSQL$X"), '@', '+', '{', '}'
//    (drivers named by a GUID); never '/' or '\' (the SCM refuses them), nor control or other characters;
//  - not starting with ' ', '.' or '-', not ending with ' ' or '.';
//  - at most kMaxWindowsServiceNameLength characters.
// Anything else is INVALID_ARGUMENT, with the name safely quoted.
StatusOr<std::string> CanonicalWindowsServiceName(std::string_view name);

// Whose rules name the services: systemd's (Linux) or the Service Control Manager's (Windows).
enum class ServiceNaming { kSystemd, kWindows };

// This build's service manager.
#if defined(_WIN32)
inline constexpr ServiceNaming kNativeServiceNaming = ServiceNaming::kWindows;
#else
inline constexpr ServiceNaming kNativeServiceNaming = ServiceNaming::kSystemd;
#endif

// CanonicalServiceUnit or CanonicalWindowsServiceName, as `naming` says.
StatusOr<std::string> CanonicalServiceName(std::string_view name, ServiceNaming naming = kNativeServiceNaming);

}  // namespace csi_proxy::system

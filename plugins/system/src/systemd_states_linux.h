// How systemd's unit states read in upstream's (Windows service) terms. Pure functions, so the tables are
// tested on their own.
#pragma once

#include <string_view>

#include "system_backend.h"

namespace csi_proxy::system {

// UnitFileState -> StartType:
//   enabled, enabled-runtime                                    -> AUTOMATIC (started by systemd on its own)
//   masked, masked-runtime                                      -> DISABLED  (cannot be started at all)
//   anything else (disabled, static, indirect, generated, transient, linked, alias, "" for units without a
//   unit file, ...)                                             -> MANUAL    (runs only when asked for)
// BOOT and SYSTEM (Windows driver start modes) have no systemd counterpart and are never returned.
StartType StartTypeFromUnitFileState(std::string_view unit_file_state);

// ActiveState -> ServiceStatus:
//   active, reloading -> RUNNING; inactive, failed -> STOPPED; activating -> START_PENDING;
//   deactivating -> STOP_PENDING; anything else (e.g. "maintenance") -> UNKNOWN.
// systemd has no paused services, so CONTINUE_PENDING, PAUSE_PENDING and PAUSED are never returned.
ServiceStatus StatusFromActiveState(std::string_view active_state);

// Whether a unit in this ActiveState is "up" for dependency purposes: stopping a unit it depends on would
// stop it (everything except inactive and failed).
bool IsUpActiveState(std::string_view active_state);

}  // namespace csi_proxy::system

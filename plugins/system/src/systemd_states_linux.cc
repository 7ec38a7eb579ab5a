// systemd unit states in upstream's terms; see systemd_states_linux.h for the tables.
#include "systemd_states_linux.h"

namespace csi_proxy::system {

StartType StartTypeFromUnitFileState(std::string_view s) {
  if (s == "enabled" || s == "enabled-runtime") return StartType::kAutomatic;
  if (s == "masked" || s == "masked-runtime") return StartType::kDisabled;
  return StartType::kManual;
}

ServiceStatus StatusFromActiveState(std::string_view s) {
  if (s == "active" || s == "reloading") return ServiceStatus::kRunning;
  if (s == "inactive" || s == "failed") return ServiceStatus::kStopped;
  if (s == "activating") return ServiceStatus::kStartPending;
  if (s == "deactivating") return ServiceStatus::kStopPending;
  return ServiceStatus::kUnknown;
}

bool IsUpActiveState(std::string_view s) { return !s.empty() && s != "inactive" && s != "failed"; }

}  // namespace csi_proxy::system

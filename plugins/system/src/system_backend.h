// The OS side of the system group, as narrow interfaces: the service layer (system_service.h) speaks only to these.
// Linux: DMI / device tree and systemd (bios_serial_linux.cc, systemd_linux.cc); Windows: SMBIOS and the Service
// Control Manager (bios_serial_windows.cc, scm_windows.cc).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "csi_proxy/status.hpp"

namespace csi_proxy::sdk {
class PluginConfig;
}

namespace csi_proxy::system {

// The values are upstream's wire values (.NET ServiceControllerStatus), so adapters can cast.
enum class ServiceStatus : int {
  kUnknown = 0,
  kStopped = 1,
  kStartPending = 2,
  kStopPending = 3,
  kRunning = 4,
  kContinuePending = 5,
  kPausePending = 6,
  kPaused = 7,
};

// The values are upstream's wire values (.NET ServiceStartMode).
enum class StartType : int {
  kBoot = 0,
  kSystem = 1,
  kAutomatic = 2,
  kManual = 3,
  kDisabled = 4,
};

struct ServiceInfo {
  std::string display_name;
  StartType start_type = StartType::kManual;
  ServiceStatus status = ServiceStatus::kUnknown;
  // The OS is still working on a start or stop request (systemd: the unit has a queued job). While it is, the
  // status is not final.
  bool change_pending = false;
  // The OS's own words for the state, for messages: "ActiveState=failed SubState=failed Result=exit-code".
  std::string state_detail;
  // The unit's primary name as the OS knows it (systemd's Id): an alias resolves to the unit it names. Empty
  // when the backend does not say.
  std::string unit_id;
  // Node-wide actions the unit declares ("SuccessAction=reboot", ...); see unit_policy.h.
  std::vector<std::string> node_actions;
};

// Where the machine's BIOS (SMBIOS system) serial number comes from.
class BiosInfoSource {
 public:
  virtual ~BiosInfoSource() = default;
  // The serial as the firmware reports it. FAILED_PRECONDITION when the platform exposes none.
  virtual StatusOr<std::string> SerialNumber() = 0;
};

// The service manager. Names are already validated and canonical (see service_name.h). Requests do not wait:
// the service layer polls Query() for the final state.
class ServiceManager {
 public:
  virtual ~ServiceManager() = default;
  // NOT_FOUND when there is no such service; FAILED_PRECONDITION when the service manager is not reachable.
  virtual StatusOr<ServiceInfo> Query(const std::string& name) = 0;
  // Asks the service manager to start / stop the service (and, for stop, whatever must stop with it).
  virtual Status RequestStart(const std::string& name) = 0;
  virtual Status RequestStop(const std::string& name) = 0;
  // The services that are active now and that stopping `name` would stop too.
  virtual StatusOr<std::vector<std::string>> ActiveDependents(const std::string& name) = 0;
};

// systemd's own socket, which root can speak to without a D-Bus daemon.
inline constexpr const char* kSystemdPrivateSocket = "/run/systemd/private";

// What the group's configuration sets for the platform's backends.
struct SystemBackendOptions {
  // Files the BIOS serial is read from, the first existing one answers; empty: the platform's usual sources.
  std::vector<std::string> bios_serial_files;
  // How to reach systemd: its private socket ("" skips it), then a D-Bus address ("" means the system bus).
  std::string systemd_private_socket = kSystemdPrivateSocket;
  std::string systemd_bus_address;
  // service_timeout_seconds: on Windows, how long a forced stop waits for each dependent service to stop before
  // it stops the next one (the service layer waits for the service itself).
  std::chrono::milliseconds service_timeout{std::chrono::seconds(30)};
};

// The [groups.system] keys only this system's backends read, and reading them into `options` (README
// "Configuration"): systemd_private_socket, systemd_bus_address and bios_serial_files on Linux
// (backend_keys_linux.cc); none on Windows (scm_windows.cc).
std::vector<std::string_view> BackendKeyNames();
Status ReadBackendKeys(const sdk::PluginConfig& config, SystemBackendOptions& options);
// How the backends reach the service manager, for the group's start-up log line.
std::string DescribeServiceManager(const SystemBackendOptions& options);

// The platform's backends (defined in bios_serial_<os>.cc and systemd_linux.cc / scm_windows.cc).
std::unique_ptr<BiosInfoSource> MakeBiosInfoSource(const SystemBackendOptions& options);
std::unique_ptr<ServiceManager> MakeServiceManager(const SystemBackendOptions& options);

// The service this process runs as ("csi-proxy.service"; on Windows the canonical service name, "csi-proxy"), or
// "" when it does not run as one.
std::string OwnServiceUnit();

}  // namespace csi_proxy::system

// How the host deals with whoever runs it: the requests to stop or reload it receives, and the readiness it
// reports back. On Linux (service_manager_linux.cc): SIGTERM and SIGINT stop, SIGHUP reloads, systemd hears
// READY, RELOADING and STOPPING through sd_notify (Type=notify). On Windows (service_manager_windows.cc): the
// service control manager's stop and shutdown, or Ctrl-C and the console's close, stop; the SCM's PARAMCHANGE
// reloads (reloads come through the admin pipe otherwise); the SCM hears the service's states, and start and stop
// failures go to the event log.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "csi_proxy/status.hpp"

namespace csi_proxy::host {

// The command line's part that belongs to the system: nothing on Linux; on Windows upstream csi-proxy's flags
// (-windows-service, -kubelet-path, -working-dir, -metrics-bind-address, -require-privacy, klog's -v, -log_file,
// -logtostderr, ...), so that an install script written for upstream's csi-proxy.exe works unchanged, and the
// service's own commands (--install-service, --uninstall-service, --service-name).
struct SystemFlags {
  enum class Command { kServe, kInstallService, kUninstallService } command = Command::kServe;
  bool run_as_service = false;                     // started by the service control manager
  std::string service_name = "csiproxy";           // the service to install or uninstall (upstream scripts' name)
  std::vector<std::string> serve_args;             // the command line without the service commands, for the service
  std::string log_file;                            // the log goes to this file too
  size_t log_file_max_bytes = size_t{1800} << 20;  // then it rotates, one older file kept (klog's default)
  bool log_to_stderr = true;
  // What the flags set in the configuration (each wins over the file's value).
  std::optional<std::string> kubelet_path;
  std::optional<std::vector<std::string>> working_dirs;
  std::optional<std::string> metrics_address;
  std::optional<std::string> log_level;
  std::optional<bool> require_privacy;  // [groups.smb] require_privacy
  std::vector<std::string> notes;       // said in the log at start: flags accepted without a meaning here
};

// Takes args[i] when it is one of the system's flags (with its value, moving i past it): true. false when it is
// not one; INVALID_ARGUMENT for a bad value.
StatusOr<bool> TakeSystemFlag(const std::vector<std::string>& args, size_t& i, SystemFlags& flags);

// The usage text of those flags ("" on Linux).
std::string SystemFlagsUsage();

// The configuration with what the flags set; at start and at every reload.
void ApplySystemFlags(const SystemFlags& flags, HostConfig& config);

// Runs a command other than serving (installing or uninstalling the service): its exit code; nullopt to serve.
std::optional<int> RunSystemCommand(const SystemFlags& flags);

// Prepares the process before it starts any thread: stop and reload requests reach only WaitForRequest (threads
// started later inherit that), a peer that goes away is no signal, the open-file limit is raised as far as the
// system allows (every connection is a descriptor), and a crash (a fatal signal, an abort) leaves one line on
// standard error naming the signal and the group whose code the crashing thread ran (abi/library_scope.h). On
// Windows it connects to the service control manager when run as a service, which fails when the SCM did not
// start the process.
Status PrepareProcess(const SystemFlags& flags);

struct ServiceRequest {
  enum Kind { kReload, kStop } kind = kStop;
  std::string name;  // how it came, for the log: "SIGHUP", "SIGTERM", "a service stop"
};

// Waits for the next request to stop or reload.
ServiceRequest WaitForRequest();

// The service manager's view of the host: it serves `endpoints` endpoints; it is reloading; it is stopping.
void NotifyReady(size_t endpoints);
void NotifyReloading();
void NotifyStopping();

// The host exits with `exit_code` now; `failure` says why when it failed to start or to stop. Windows reports the
// service stopped and writes a failure to the event log; Linux has nothing to add (systemd sees the status and
// the log).
void NotifyExiting(int exit_code, const std::string& failure = "");

}  // namespace csi_proxy::host

// How the host deals with whoever runs it: the requests to stop or reload it receives, and the readiness it
// reports back. On Linux (service_manager_linux.cc): SIGTERM and SIGINT stop, SIGHUP reloads, systemd hears
// READY, RELOADING and STOPPING through sd_notify (Type=notify). A Windows side goes beside it (the service control
// manager's stop; reloads come through the admin socket only).
#pragma once

#include <cstddef>
#include <string>

namespace csi_proxy::host {

// Prepares the process before it starts any thread: stop and reload requests reach only WaitForRequest (threads
// started later inherit that), a peer that goes away is no signal, the open-file limit is raised as far as the
// system allows (every connection is a descriptor), and a crash (a fatal signal, an abort) leaves one line on
// standard error naming the signal and the group whose code the crashing thread ran (abi/library_scope.h).
void PrepareProcess();

struct ServiceRequest {
  enum Kind { kReload, kStop } kind = kStop;
  std::string name;  // how it came, for the log: "SIGHUP", "SIGTERM"
};

// Waits for the next request to stop or reload.
ServiceRequest WaitForRequest();

// The service manager's view of the host: it serves `endpoints` endpoints; it is reloading; it is stopping.
void NotifyReady(size_t endpoints);
void NotifyReloading();
void NotifyStopping();

}  // namespace csi_proxy::host

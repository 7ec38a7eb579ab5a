// See service_manager.h: signals taken synchronously by the main thread, and systemd's notification socket
// (sd_notify is a no-op without NOTIFY_SOCKET).
#include "runtime/service_manager.h"

#include <signal.h>
#include <sys/resource.h>
#include <systemd/sd-daemon.h>
#include <time.h>

namespace csi_proxy::host {
namespace {

sigset_t RequestSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  return signals;
}

}  // namespace

// Linux has no command-line flags beyond main's, and nothing to run but the host.
StatusOr<bool> TakeSystemFlag(const std::vector<std::string>&, size_t&, SystemFlags&) { return false; }

std::string SystemFlagsUsage() { return ""; }

void ApplySystemFlags(const SystemFlags&, HostConfig&) {}

std::optional<int> RunSystemCommand(const SystemFlags&) { return std::nullopt; }

Status PrepareProcess(const SystemFlags&) {
  sigset_t signals = RequestSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  // Take what the hard limit allows (systemd's default soft limit is 1024).
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }
  return Status::Ok();
}

ServiceRequest WaitForRequest() {
  sigset_t signals = RequestSignals();
  int sig = 0;
  sigwait(&signals, &sig);
  if (sig == SIGHUP) return {ServiceRequest::kReload, "SIGHUP"};
  return {ServiceRequest::kStop, sig == SIGTERM ? "SIGTERM" : "SIGINT"};
}

void NotifyReady(size_t endpoints) { sd_notifyf(0, "READY=1\nSTATUS=serving %zu endpoints", endpoints); }

void NotifyReloading() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  sd_notifyf(
      0, "RELOADING=1\nMONOTONIC_USEC=%llu",
      static_cast<unsigned long long>(now.tv_sec) * 1000000ULL + static_cast<unsigned long long>(now.tv_nsec) / 1000);
}

void NotifyStopping() { sd_notify(0, "STOPPING=1"); }

void NotifyExiting(int, const std::string&) {}

}  // namespace csi_proxy::host

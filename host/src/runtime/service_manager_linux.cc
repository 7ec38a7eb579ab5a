// See service_manager.h: signals taken synchronously by the main thread, systemd's notification socket
// (sd_notify is a no-op without NOTIFY_SOCKET), and the line a fatal signal leaves.
#include "runtime/service_manager.h"

#include "abi/library_scope.h"

#include <signal.h>
#include <sys/resource.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>

namespace csi_proxy::host {
namespace {

// Builds a line in a fixed buffer with nothing but stores: a signal handler may not allocate or lock.
struct CrashLine {
  char text[512];
  size_t size = 0;
  void Add(const char* s) {
    while (s != nullptr && *s != '\0' && size < sizeof text - 1) text[size++] = *s++;
  }
  void Add(uint64_t n, int width = 1) {
    char digits[24];
    int k = 0;
    do {
      digits[k++] = static_cast<char>('0' + n % 10);
      n /= 10;
    } while (n != 0 || k < width);
    while (k > 0 && size < sizeof text - 1) text[size++] = digits[--k];
  }
};

const char* SignalName(int sig) {
  switch (sig) {
    case SIGSEGV:
      return "SIGSEGV";
    case SIGBUS:
      return "SIGBUS";
    case SIGILL:
      return "SIGILL";
    case SIGFPE:
      return "SIGFPE";
    case SIGABRT:
      return "SIGABRT";
    case SIGSYS:
      return "SIGSYS";
  }
  return "a fatal signal";
}

// The time as the log prints it, in UTC: 2026-11-27T11:34:00.123Z (civil date from days since the epoch, by
// arithmetic alone).
void AddUtcTime(CrashLine& line) {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  int64_t days = now.tv_sec / 86400, secs = now.tv_sec % 86400;
  int64_t z = days + 719468, era = z / 146097, doe = z - era * 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;
  int64_t day = doy - (153 * mp + 2) / 5 + 1, month = mp < 10 ? mp + 3 : mp - 9;
  int64_t year = yoe + era * 400 + (month <= 2 ? 1 : 0);
  line.Add(static_cast<uint64_t>(year), 4);
  line.Add("-");
  line.Add(static_cast<uint64_t>(month), 2);
  line.Add("-");
  line.Add(static_cast<uint64_t>(day), 2);
  line.Add("T");
  line.Add(static_cast<uint64_t>(secs / 3600), 2);
  line.Add(":");
  line.Add(static_cast<uint64_t>(secs / 60 % 60), 2);
  line.Add(":");
  line.Add(static_cast<uint64_t>(secs % 60), 2);
  line.Add(".");
  line.Add(static_cast<uint64_t>(now.tv_nsec / 1000000), 3);
  line.Add("Z");
}

// One line on standard error (the journal) naming the signal and the library code the thread ran, then the
// signal's own default action (the handler was installed with SA_RESETHAND), which ends the process.
void OnFatalSignal(int sig, siginfo_t*, void*) {
  CrashLine line;
  AddUtcTime(line);
  line.Add(" critical fatal signal ");
  line.Add(SignalName(sig));
  line.Add(" (");
  line.Add(static_cast<uint64_t>(sig));
  line.Add(")");
  if (const char* group = CurrentLibraryGroup()) {
    line.Add(" in group '");
    line.Add(group);
    line.Add("' (");
    line.Add(CurrentLibraryWork());
    line.Add(")");
  } else {
    line.Add(" in the host itself");
  }
  line.Add("; the process ends\n");
  ssize_t ignored = write(STDERR_FILENO, line.text, line.size);
  (void)ignored;
  raise(sig);
}

// Under AddressSanitizer its own handler reports a crash with far more; the host's would take its place.
#ifdef __SANITIZE_ADDRESS__
constexpr bool kCrashLine = false;
#else
constexpr bool kCrashLine = true;
#endif

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
  if (kCrashLine) {
    struct sigaction crash {};
    crash.sa_sigaction = &OnFatalSignal;
    crash.sa_flags = SA_SIGINFO | SA_RESETHAND;
    sigemptyset(&crash.sa_mask);
    for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGSYS}) sigaction(sig, &crash, nullptr);
  }
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

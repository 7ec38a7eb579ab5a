// csi-proxy: reads the configuration, loads the enabled API-group libraries and serves their endpoints.
#include <absl/synchronization/mutex.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "abi/plugin_loader.h"
#include "config/config.h"
#include "config/default_paths.h"
#include "config/trusted_files.h"
#include "observe/log_setup.h"
#include "runtime/admin_server.h"
#include "runtime/host_runtime.h"
#include "runtime/page_trim.h"
#include "runtime/service_manager.h"

namespace {

using csi_proxy::host::HostConfig;

constexpr const char* kUsage =
    R"(Usage: csi-proxy [--config FILE] [--check-config] [--log-level LEVEL] [--allow-untrusted-files]
       csi-proxy --version | --help

Serves the csi-proxy API groups named in the configuration, one Unix socket per group and version
(csi-proxy-<group>-<version>) in the configured endpoint directory.

  --config FILE       the TOML configuration (default: ../etc/csi-proxy/csi-proxy.toml beside the executable;
                      /etc/csi-proxy/csi-proxy.toml for an executable in /usr/bin)
  --check-config      load the configuration and every enabled group library, print what would be served,
                      and exit: 0 when every enabled group loads, 1 with the reasons otherwise
  --log-level LEVEL   trace, debug, info, warn (or warning) or error; overrides [host] log_level
  --allow-untrusted-files
                      load libraries and the configuration even when a user other than root (or the host's own)
                      could change them; for development only
  --version           print the version and exit
  --help              print this text and exit
)";

struct Options {
  std::string config_path;
  std::string log_level;
  bool check_config = false;
  bool allow_untrusted_files = false;
};

std::string Usage() { return kUsage + csi_proxy::host::SystemFlagsUsage(); }

int UsageError(const std::string& message) {
  std::fprintf(stderr, "csi-proxy: %s\n\n%s", message.c_str(), Usage().c_str());
  return 2;
}

// Exits with a failure the service manager hears of too.
int Fail(const std::string& why) {
  csi_proxy::host::NotifyExiting(1, why);
  return 1;
}

// --check-config: what a start would serve, found by the start's own loading (HostRuntime::CheckStart).
int CheckConfig(const HostConfig& config) {
  csi_proxy::host::StartCheck check = csi_proxy::host::HostRuntime::CheckStart(config);
  std::printf("%-12s %-10s %-34s %s\n", "GROUP", "VERSION", "ENDPOINT", "LIBRARY");
  for (const auto& [name, e] : check.endpoints) {
    std::printf("%-12s %-10s %-34s %s\n", e.group.c_str(), e.version.c_str(),
                csi_proxy::host::EndpointPath(config.endpoint_dir, name).c_str(), e.library.c_str());
  }
  for (const auto& r : check.skipped) std::printf("skipped: %s\n", r.c_str());
  for (const auto& r : check.refused) std::printf("refused: %s\n", r.c_str());
  for (const auto& w : check.warnings) std::printf("warning: %s\n", w.c_str());
  bool ok = check.start_would_succeed();
  std::printf("%s\n", ok ? "a start would serve this configuration" : "a start would be refused");
  return ok ? 0 : 1;
}

// How much longer than shutdown_timeout_seconds a stop may take before the watchdog ends the process: the calls'
// deadline passed, this is for the libraries' shutdown and the host's own.
constexpr std::chrono::seconds kStopMargin{5};

// Ends the process after `bound`, with a line saying so, unless it has exited by then.
void StartStopWatchdog(std::chrono::milliseconds bound, std::string sig_name) {
  std::thread([bound, sig_name] {
    std::this_thread::sleep_for(bound);
    spdlog::error("still stopping {} ms after {}; exiting now (a library's shutdown or init does not return)",
                  bound.count(), sig_name);
    csi_proxy::host::NotifyExiting(1, "still stopping " + std::to_string(bound.count()) + " ms after " + sig_name);
    spdlog::shutdown();
    std::_Exit(1);
  }).detach();
}

// A library's init given up at a start or a reload, or a handler a drain left running, may still run: exiting
// normally would run the process's static destructors under it. Exits at once in that case (the service manager
// heard of the exit already); returns otherwise.
void ExitLeavingLibrariesRunning(int code) {
  if (!csi_proxy::host::GroupRuntime::LibraryCodeMayRun()) return;
  spdlog::warn(
      "a library's init that was given up, or a handler past its deadline, still runs; exiting without "
      "waiting for it");
  spdlog::shutdown();
  std::_Exit(code);
}

// Runs the reloads SIGHUP asks for, one at a time on a thread of its own; requests that come during a reload make
// one reload after it.
class Reloader {
 public:
  explicit Reloader(std::function<csi_proxy::host::ReloadReport()> reload)
      : reload_(std::move(reload)), thread_([this] { Run(); }) {}
  ~Reloader() { Stop(); }
  void Request() {
    std::lock_guard lock(mu_);
    pending_ = true;
    changed_.notify_all();
  }
  // Takes no more requests and waits for the reload under way (which ends soon once the host is stopping).
  void Stop() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      changed_.notify_all();
    }
    if (thread_.joinable()) thread_.join();
  }

 private:
  void Run() {
    std::unique_lock lock(mu_);
    for (;;) {
      changed_.wait(lock, [&] { return pending_ || stopping_; });
      if (stopping_) return;
      pending_ = false;
      lock.unlock();
      reload_();
      lock.lock();
    }
  }

  std::function<csi_proxy::host::ReloadReport()> reload_;
  std::mutex mu_;
  std::condition_variable changed_;
  bool pending_ = false;   // guarded by mu_
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace

int main(int argc, char** argv) {
  // Debian builds Abseil without NDEBUG, which leaves absl::Mutex's deadlock detection on: every lock gRPC takes
  // also updates a process-wide lock-order graph (about a twentieth of the host's CPU time under load). The
  // host has no use for it in production.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  Options opts;
  csi_proxy::host::SystemFlags system;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const std::string& flag) -> std::string {
      if (a.rfind(flag + "=", 0) == 0) return a.substr(flag.size() + 1);
      if (i + 1 < args.size()) return args[++i];
      return {};
    };
    if (a == "--help" || a == "-h") {
      std::fputs(Usage().c_str(), stdout);
      return 0;
    } else if (a == "--version") {
      std::printf("csi-proxy %s (plugin ABI %u-%u)\n", CSI_PROXY_HOST_VERSION, csi_proxy::host::kAbiVersionMin,
                  csi_proxy::host::kAbiVersionMax);
      return 0;
    } else if (a == "--check-config") {
      opts.check_config = true;
    } else if (a == "--allow-untrusted-files") {
      opts.allow_untrusted_files = true;
    } else if (a == "--config" || a.rfind("--config=", 0) == 0) {
      opts.config_path = value("--config");
      if (opts.config_path.empty()) return UsageError("--config needs a file");
    } else if (a == "--log-level" || a.rfind("--log-level=", 0) == 0) {
      opts.log_level = value("--log-level");
      if (!csi_proxy::host::IsValidLogLevel(opts.log_level))
        return UsageError("bad --log-level '" + opts.log_level + "'");
    } else if (auto taken = csi_proxy::host::TakeSystemFlag(args, i, system); !taken.ok()) {
      return UsageError(taken.status().message());
    } else if (!*taken) {
      return UsageError("unknown argument '" + a + "'");
    }
  }
  if (auto exit_code = csi_proxy::host::RunSystemCommand(system)) return *exit_code;

  // Before any thread starts: stop and reload requests are the main thread's to take.
  if (auto s = csi_proxy::host::PrepareProcess(system); !s.ok()) {
    std::fprintf(stderr, "csi-proxy: exiting: %s\n", s.message().c_str());
    return Fail(s.message());
  }

  std::string exe_dir = csi_proxy::host::ExecutableDirectory();
  if (opts.config_path.empty()) opts.config_path = csi_proxy::host::DefaultConfigPath(exe_dir);
  if (opts.allow_untrusted_files) csi_proxy::host::AllowUntrustedFiles();
  auto load_config = [&]() -> csi_proxy::StatusOr<HostConfig> {
    auto config = csi_proxy::host::LoadConfig(opts.config_path, exe_dir);
    if (config.ok()) csi_proxy::host::ApplySystemFlags(system, *config);
    if (config.ok() && !opts.log_level.empty()) config->log_level = opts.log_level;  // the flag wins
    return config;
  };
  auto config = load_config();
  if (!config.ok()) {
    std::fprintf(stderr, "csi-proxy: exiting: the configuration is refused: %s\n", config.status().message().c_str());
    return Fail("the configuration is refused: " + config.status().message());
  }
  if (auto s = csi_proxy::host::SetUpLogging(config->log_level, config->log_format, system.log_file,
                                             system.log_file_max_bytes, system.log_to_stderr);
      !s.ok()) {
    std::fprintf(stderr, "csi-proxy: exiting: %s\n", s.message().c_str());
    return Fail(s.message());
  }
  csi_proxy::host::LogFatalErrorsOnTerminate();
  spdlog::info("csi-proxy {} starting with {}", CSI_PROXY_HOST_VERSION, opts.config_path);
  for (const auto& note : system.notes) spdlog::info("{}", note);

  if (opts.check_config) {
    int code = CheckConfig(*config);
    ExitLeavingLibrariesRunning(code);
    return code;
  }

  // A second host stops here, before any group's init runs. The admin socket comes up before the endpoints, so
  // that once they accept, reload and status are served too.
  if (auto s = csi_proxy::host::ClaimHost(*config); !s.ok()) {
    spdlog::error("{}", s.message());
    spdlog::error("exiting: another csi-proxy serves this configuration");
    return Fail(s.message());
  }
  csi_proxy::host::HostRuntime runtime;
  csi_proxy::host::PageTrimmer trimmer;
  // Once a burst of streams has ended, what it held is given back a second later.
  runtime.OnStreamBurstEnded([&] { trimmer.Schedule(std::chrono::seconds(1)); });
  // A reload, from SIGHUP or the admin socket; once reloads stop for a second, the pages the new libraries touched
  // while loading are given back.
  auto reload = [&] {
    csi_proxy::host::NotifyReloading();
    csi_proxy::host::ReloadReport report = runtime.Reload(load_config());
    csi_proxy::host::NotifyReady(runtime.socket_paths().size());
    trimmer.Schedule(std::chrono::seconds(1));
    return report;
  };
  csi_proxy::host::AdminServer admin(runtime, opts.config_path, reload);
  if (auto s = admin.Start(config->admin_socket); !s.ok()) {
    spdlog::error("exiting: the admin socket cannot be served: {}", s.message());
    return Fail("the admin socket cannot be served: " + s.message());
  }
  if (auto s = runtime.Start(*config); !s.ok()) {
    spdlog::error("exiting: {}", s.message());
    admin.Stop();
    runtime.Shutdown();
    int code = Fail(s.message());
    ExitLeavingLibrariesRunning(code);
    return code;
  }
  for (const auto& path : runtime.socket_paths()) spdlog::info("serving {}", path);
  spdlog::info("admin socket {}", config->admin_socket);
  spdlog::info("ready: {} endpoints", runtime.socket_paths().size());
  csi_proxy::host::NotifyReady(runtime.socket_paths().size());
  trimmer.Schedule(std::chrono::milliseconds(0));

  // SIGHUP reloads on a thread of its own, so that a stop request is taken at once even during a reload; signals
  // that come while one runs make one more reload after it.
  Reloader reloader(reload);
  csi_proxy::host::ServiceRequest request;
  for (;;) {
    request = csi_proxy::host::WaitForRequest();
    if (request.kind != csi_proxy::host::ServiceRequest::kReload) break;
    spdlog::info("received {}; reloading {}", request.name, opts.config_path);
    reloader.Request();
  }
  const std::string& sig_name = request.name;
  spdlog::info("received {}; stopping (calls in flight may finish within shutdown_timeout_seconds)", sig_name);
  csi_proxy::host::NotifyStopping();
  // A reload under way gives up now; whatever hangs from here on (a library's init or shutdown), the process ends
  // within shutdown_timeout_seconds and a margin.
  runtime.BeginShutdown();
  StartStopWatchdog(runtime.shutdown_timeout() + kStopMargin, sig_name);
  admin.Stop();
  reloader.Stop();
  auto still_running = runtime.Shutdown();
  trimmer.Stop();
  if (!still_running.empty()) {
    // Their handlers never returned: exiting normally would run the libraries' destructors under them.
    spdlog::warn("stopped with {} group(s) still running a call; exiting on {} without waiting for them",
                 still_running.size(), sig_name);
    csi_proxy::host::NotifyExiting(0, "stopped with calls still running past shutdown_timeout_seconds: " +
                                          still_running.front() + (still_running.size() > 1 ? ", ..." : ""));
    spdlog::shutdown();
    std::_Exit(0);
  }
  spdlog::info("stopped");
  spdlog::info("exiting on {}", sig_name);
  csi_proxy::host::NotifyExiting(0);
  ExitLeavingLibrariesRunning(0);
  return 0;
}
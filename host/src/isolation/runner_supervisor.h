// The host's side of an isolated group: the runner process that loads the group's library (host/runner/), started,
// watched and restarted. Calls go to the runner over a socket pair (runner_protocol.h) and their answers come back
// to the call handles the router made, so that a group instance (serving/group_runtime.h) serves an isolated
// group behind the same CallDispatcher as one in process. A runner that dies (a crash, an abort, an exit, the OOM
// killer) or that the host kills (a call hung past its deadline) fails only its own calls in flight, UNAVAILABLE
// with a message naming the group and how the runner ended; the runner is started again after a backoff, and the
// group is marked failed once it ended too often within the configured window. The process side is the system's
// (runner_supervisor_linux.cc; on Windows, runner_supervisor_windows.cc refuses isolation).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "abi/call_handle.h"
#include "abi/endpoint_registry.h"
#include "config/config.h"
#include "csi_proxy/status.hpp"

namespace csi_proxy::host {

// What the runner's library registered, as its handshake reported it. The services' handlers hold no function:
// a call names its method by its index in `method_paths`.
struct RunnerDescription {
  std::string plugin_version;
  uint32_t abi_version = 0;
  std::vector<std::string> skipped_versions;
  std::vector<ServiceRegistration> services;
  std::vector<std::string> method_paths;  // every method of `services`, in their order
  std::vector<bool> non_blocking;         // by the same index: the method is declared NONBLOCKING
};

struct RunnerUsage {
  pid_t pid = 0;          // the runner serving now; 0 while none is
  uint64_t restarts = 0;  // runners started after the first
  bool failed = false;    // ended more often than restart_limit within restart_window_seconds
  std::string last_exit;  // how the last runner ended ("killed by signal 11 (SIGSEGV)"), empty if none has
};

// How the group's budget is used in its runner (serving/group_executor.h's Usage, as the runner reports it).
struct RunnerBudget {
  int running = 0;
  size_t queued = 0;
  uint64_t refused = 0;  // by every runner of the group so far
  int threads = 0;
};

class RunnerSupervisor {
 public:
  virtual ~RunnerSupervisor() = default;

  // Starts the runner of `group` (the executable csi-proxy-runner beside the host's own) and waits until its
  // library is initialised or refused, or `deadline` passes. The refusal is the library's, as LoadPlugin words it.
  static StatusOr<std::unique_ptr<RunnerSupervisor>> Start(const GroupConfig& group, const HostConfig& host,
                                                           std::chrono::steady_clock::time_point deadline);
  // The executable an isolated group runs in.
  static std::string RunnerPath();

  virtual const RunnerDescription& description() const = 0;
  // Hands the call to the runner, or answers it UNAVAILABLE when no runner serves now. Never blocks.
  virtual void Send(uint32_t method_index, CallHandle call) = 0;
  // Asks the runner to shut its library down once the calls it runs have finished, waits until `deadline`, then
  // kills it. Calls still in flight then are answered UNAVAILABLE. No runner is left behind, and no zombie.
  virtual void Stop(std::chrono::steady_clock::time_point deadline) = 0;
  virtual RunnerUsage usage() const = 0;
  // The budget's use now: asked of the runner, which answers after the calls sent before (so a call just sent is
  // counted); what it said last when it has not answered within `wait`; nothing running or queued while no runner
  // serves. Never called on a call's path.
  virtual RunnerBudget Budget(std::chrono::milliseconds wait) = 0;
  // The host's log level changed: the runner (and any restarted later) logs at `level` from now on.
  virtual void SetLogLevel(const std::string& level) = 0;
  // Told (on the supervisor's thread) when the group turns failed (false).
  virtual void OnAvailability(std::function<void(bool)> listener) = 0;
};

}  // namespace csi_proxy::host

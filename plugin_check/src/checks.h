// The checks, as the child process runs them against the library loaded through the host's own ABI code
// (abi/plugin_loader.h, abi/call_handle.h), or served by csi-proxy-runner (isolation/runner_supervisor.h). The kit
// (main.cc) plans them and reads the child's reports, one line each:
//   "M <flags> <path>"               a method the library registered (the newest host's ABI check sends these)
//   "S <index> <budget ms>"          check <index> starts; the kit waits that long for its result
//   "R <index> <PASS|FAIL|SKIP> <detail>"
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "isolation.h"
#include "kit_config.h"

namespace csi_proxy::plugin_check {

enum class CheckKind {
  kAbiNewest,     // negotiation with this host: ABI versions 1 to the newest, the whole host table
  kAbiOldest,     // negotiation with the oldest host this one stands for: ABI version 1, the version-1 table
  kInitTwice,     // load, init, a call, shutdown, unload; and again in the same process
  kReloadTwice,   // a new instance initialised beside the serving one, the old one shut down; twice
  kFdLeak,        // no descriptor left open by N reloads
  kMemoryGrowth,  // resident memory after N reloads within a bound
  kFuzz,          // every input answered once, in time, with a status gRPC has
  kDeadline,      // calls the host answered first (deadline, cancellation): completed once, no crash
  kConcurrent,    // a read-only method called from several threads at once
  // The library as an isolated group is served: in csi-proxy-runner, started, called and stopped through the
  // host's RunnerSupervisor, confined by the group's privileges (the kit runs the supervisor in its child).
  kIsolatedStart,  // the runner starts, confines itself and loads the library, which registers what it does in process
  kIsolatedCalls,  // a method called through the runner: its sample request and a few fuzz inputs
  kIsolatedStop,   // the runner shuts the library down and exits; no runner and no zombie are left
};

// The fuzz inputs (numbers 0 to N-1) the isolated calls check sends each method after its sample request.
inline constexpr uint64_t kIsolatedFuzzInputs = 4;

struct CheckItem {
  CheckKind kind;
  std::string name;    // as reported: "fuzz /v1.Echo/Echo"
  std::string method;  // the method path, for the per-method checks
};

struct RunSettings {
  KitConfig config;
  uint64_t seed = 0;
  std::chrono::milliseconds fuzz_time{1000};  // each fuzzed method's share of --seconds
  int64_t only_input = -1;                    // --input: run only this input of each fuzz check
};

// Runs items[from...] in this process (the child), reporting on `channel`; returns when all have run.
void RunChecks(const std::vector<CheckItem>& items, size_t from, const RunSettings& settings,
               const ChildChannel& channel);

// The child's exit status when it stops after a failed check on purpose: the kit runs the rest in a new child.
inline constexpr int kExitForAFreshProcess = 75;

// How long the kit waits for a child to load the library and start its first check.
std::chrono::milliseconds LoadBudget(const KitConfig& config);

}  // namespace csi_proxy::plugin_check

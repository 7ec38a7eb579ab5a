// One loaded instance of an API group at run time: its library, the endpoints it serves, its execution budget and
// its calls in flight. During an upgrade two instances of a group live side by side: the new one takes new calls
// while the old one drains. The library runs in the host's process, or (isolation = "process") in a runner process
// of its own that a RunnerSupervisor starts and restarts; either way the instance is the endpoints' dispatcher.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "abi/endpoint_registry.h"
#include "abi/plugin_loader.h"
#include "config/config.h"
#include "isolation/runner_supervisor.h"
#include "serving/group_executor.h"
#include "serving/router.h"

namespace csi_proxy::host {

class GroupRuntime final : public CallDispatcher {
 public:
  // Loads and initialises `group`; its endpoints must not clash with those in `others`.
  static StatusOr<std::shared_ptr<GroupRuntime>> Load(const GroupConfig& group, const HostConfig& host,
                                                      const EndpointRegistry& others);
  // Load, on a thread of its own, waited for until `deadline` or until `stop` turns true. A load that has not
  // finished by then is refused (DEADLINE_EXCEEDED, or UNAVAILABLE on stop) and left to finish on its own: an
  // instance it makes later is shut down and unloaded there. While such a load runs, LibraryCodeMayRun() says so.
  static StatusOr<std::shared_ptr<GroupRuntime>> LoadWithin(const GroupConfig& group, const HostConfig& host,
                                                            const EndpointRegistry& others,
                                                            std::chrono::steady_clock::time_point deadline,
                                                            const std::atomic<bool>& stop);
  // Whether code of a library may still run on a thread the host no longer waits for: a load given up that has
  // not returned, or a handler still running past a drain's or a stop's deadline (its library stays loaded). The
  // process must then exit without its static destructors (std::_Exit), which would run under that code.
  static bool LibraryCodeMayRun();
  ~GroupRuntime() override;

  const std::string& name() const { return name_; }  // the [groups.<name>] table
  // What the library answered and registered, in process or in its runner.
  const std::string& group() const { return group_; }
  const std::string& library() const { return library_; }
  const std::string& plugin_version() const { return plugin_version_; }
  uint32_t abi_version() const { return abi_version_; }
  const std::vector<std::string>& skipped_versions() const { return skipped_versions_; }
  const std::vector<ServiceRegistration>& services() const { return services_; }
  Isolation isolation() const { return runner_ ? Isolation::kProcess : Isolation::kInProcess; }
  // What the instance was loaded from: the configuration it was given and the library file's identity. A reload
  // replaces the instance when this changes.
  const std::string& fingerprint() const { return fingerprint_; }
  bool required() const { return required_.load(std::memory_order_relaxed); }
  // The largest request the group accepts ([groups.<name>] max_request_bytes).
  size_t max_request_bytes() const { return max_request_bytes_; }
  void set_required(bool required) { required_.store(required, std::memory_order_relaxed); }
  // What the group's runner may do (DescribePrivileges), for the admin's status; empty for a group whose table
  // confines nothing (RefuseUnappliedPrivileges keeps the privilege keys to groups in a runner of their own).
  const std::string& privileges() const { return privileges_; }

  // The host's log level changed: an isolated group's runner follows it (in process, the host's is the library's).
  void SetLogLevel(const std::string& level) {
    if (runner_) runner_->SetLogLevel(level);
  }

  // Endpoint name -> its methods.
  const std::map<std::string, Endpoint>& endpoints() const { return endpoints_; }

  // CallDispatcher: runs the handler within the group's budget: on the thread that read the request when the
  // method is declared CSI_PROXY_METHOD_NONBLOCKING; any other on that thread too when the group has a place
  // free, nobody waits for one and no other handler that may block runs on a gRPC thread (the borrowed thread);
  // on one of the group's workers otherwise.
  Status Dispatch(const MethodHandler& handler, CallHandle call) override;
  bool Available() const override;
  void AddWatcher(const void* key, std::function<void()> changed) override;
  void RemoveWatcher(const void* key) override;

  // Takes no new calls; lets those in flight finish until `deadline`, then shuts the library down and unloads
  // it. A call still running in the library at the deadline keeps it loaded (never shut down under a running
  // handler); the returned list names those calls' methods.
  std::vector<std::string> Stop(std::chrono::steady_clock::time_point deadline);

  // Where the instance is in its life, for the health service and the metrics. Set by the host runtime as it
  // reloads; Stop moves a serving instance to kDraining, and any instance to kStopped when it returns.
  // kFailed: an isolated group whose runner ended too often (restart_limit); it answers UNAVAILABLE until a reload.
  enum class State { kServing, kReloading, kDraining, kStopped, kFailed };
  State state() const;
  void set_state(State state) { state_.store(state, std::memory_order_relaxed); }
  static const char* StateName(State state);

  struct Usage {
    GroupExecutor::Usage executor;
    size_t in_flight = 0;  // calls dispatched and not yet completed (also those answered at their deadline)
    RunnerUsage runner;    // an isolated group's runner
  };
  // An isolated group's budget is its runner's, asked of it (RunnerSupervisor::Budget): not for a call's path.
  Usage usage() const;
  const GroupExecutor::Limits& limits() const { return executor_.limits(); }

  // The identity of a group as configured, for reloads: the group's keys, what the host hands it, its budget, the
  // library's path and `library_identity` (LibraryFileIdentity of that file). A reload replaces an instance whose
  // fingerprint differs from that of the group in the new configuration.
  static std::string Fingerprint(const GroupConfig& group, const HostConfig& host, const std::string& library_identity);

 private:
  GroupRuntime(const GroupConfig& group, const HostConfig& host, std::string fingerprint);
  void TakeRegistrations(const std::vector<ServiceRegistration>& services);
  std::vector<std::string> StopAndUnload(std::chrono::steady_clock::time_point deadline);

  // Calls dispatched and not yet completed, by method.
  struct InFlight {
    std::mutex mu;
    std::condition_variable empty;
    std::multiset<std::string> methods;
    int dispatching = 0;    // calls tracked and not yet run inline or handed to the executor
    bool stopping = false;  // set by Stop: no call is tracked (so none starts) any more
  };

  // Counts the call in flight until the plugin completes it, and as being dispatched until EndDispatch; false once
  // the group is stopping.
  bool Track(const CallHandle& call);
  static void EndDispatch(InFlight& in_flight);
  // How long a method's handler has kept its thread lately: only one whose last runs all returned quickly may run
  // on a borrowed gRPC thread, so a method that blocks (a mount, a probe, a stuck server) is left to the workers.
  struct MethodRuns {
    mutable std::atomic<int> quick_in_a_row{0};
    void Record(std::chrono::steady_clock::duration took) const;
    bool MayBorrow() const;
  };
  using AllMethodRuns = std::unordered_map<const MethodHandler*, MethodRuns>;
  // What a run outside Dispatch holds: the record, kept alive with the table it is in (the instance may go first).
  struct RunsRef {
    std::shared_ptr<const AllMethodRuns> table;
    const MethodRuns* runs = nullptr;
  };
  // Runs the handler on this thread and records how long it took.
  static void RunTimed(const MethodHandler& handler, csi_proxy_host_call& call, const RunsRef& runs);
  // A handler that may block, run on the gRPC thread that read its request after that read's reaction.
  struct BorrowedRun;
  bool RunOnBorrowedThread(const MethodHandler& handler, const CallHandle& call, const RunsRef& runs);
  // Runs the plugin's handler on this thread; a call already cancelled or past its deadline never reaches it.
  static void RunHandler(const MethodHandler& handler, csi_proxy_host_call& call);

  const std::string name_;
  const std::string fingerprint_;
  std::atomic<bool> required_;
  const size_t max_request_bytes_;
  const std::string privileges_;
  std::string group_, library_, plugin_version_;
  uint32_t abi_version_ = 0;
  std::vector<std::string> skipped_versions_;
  std::vector<ServiceRegistration> services_;
  std::unique_ptr<LoadedPlugin> plugin_;                      // in process
  std::unique_ptr<RunnerSupervisor> runner_;                  // isolated
  std::unordered_map<std::string, uint32_t> runner_methods_;  // method path -> its index in the runner's list
  std::map<std::string, Endpoint> endpoints_;
  // By the address of each handler in endpoints_ (which never change after Load).
  std::shared_ptr<AllMethodRuns> method_runs_ = std::make_shared<AllMethodRuns>();
  GroupExecutor executor_;
  std::shared_ptr<InFlight> in_flight_ = std::make_shared<InFlight>();
  bool stopped_ = false;
  std::atomic<State> state_{State::kServing};
  std::mutex watchers_mu_;
  std::map<const void*, std::function<void()>> watchers_;  // guarded by watchers_mu_, and held while they run
};

}  // namespace csi_proxy::host

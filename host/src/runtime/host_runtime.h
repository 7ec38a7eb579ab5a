// The running host: the loaded group instances, the endpoints they serve and the accept loop in front of them.
// Start serves a configuration; Reload applies a new one group by group without touching what did not change;
// Shutdown stops everything within the configured timeout, whatever a handler does. What the admin reads (Describe,
// FindEndpoint) comes from a snapshot the runtime publishes as it changes, so that reading it never waits for a
// reload.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "config/config.h"
#include "observe/audit_log.h"
#include "observe/metrics.h"
#include "serving/endpoint_server.h"
#include "serving/endpoint_socket.h"
#include "serving/group_runtime.h"
#include "serving/listeners.h"
#include "serving/stream_limits.h"

namespace csi_proxy::host {

// Makes sure no other host serves this configuration's sockets or uses its state directory (which stays locked
// for the life of the process), before any group's init runs: a group may clean its state up at init.
Status ClaimHost(const HostConfig& config);

// endpoint_dir, the admin socket's directory, state_dir and the audit log's directory are trusted directories
// (config/trusted_files.h), as far as they exist, and endpoint_dir can be created (its parent exists). A start
// checks them; so does --check-config.
Status CheckHostDirectories(const HostConfig& config);

// kubelet_path or a working dir that does not exist (yet): the groups that take paths refuse them until it does.
std::vector<std::string> PathWarnings(const HostConfig& config);

// What a reload did, for the log and the admin request.
struct ReloadReport {
  bool config_ok = true;             // false: the new configuration was refused whole and nothing changed
  std::vector<std::string> applied;  // one line per change made
  std::vector<std::string> refused;  // one line per change that could not be made (the old state stays)
  std::vector<std::string> notes;    // settings that take effect only at the next start, calls that outlived a drain
  std::chrono::milliseconds took{0};
  std::string Summary() const;  // one line
};

// What a start of a configuration would serve, found the way a start finds it: for --check-config.
struct StartCheck {
  std::map<std::string, Endpoint> endpoints;  // by endpoint name
  std::vector<std::string> skipped;           // optional groups that would be skipped, and why
  std::vector<std::string> refused;           // what would stop a start
  std::vector<std::string> warnings;          // PathWarnings
  bool start_would_succeed() const { return refused.empty(); }
};

// One loaded group as the admin sees it.
struct GroupState {
  std::string name;  // [groups.<name>]
  std::string group;
  std::string library;
  std::string plugin_version;
  uint32_t abi_version = 0;
  std::vector<std::string> endpoints;
  GroupExecutor::Limits limits;
  GroupRuntime::Usage usage;
  bool required = false;
  std::string state;                           // GroupRuntime::StateName: serving, reloading, draining, stopped, failed
  std::string isolation;                       // IsolationName: in-process or process
  std::vector<std::string> read_only_methods;  // full method paths the library marked read-only, sorted
  std::string privileges;                      // what its runner may do (GroupRuntime::privileges), or empty
};

class HostRuntime {
 public:
  HostRuntime() = default;
  ~HostRuntime();
  HostRuntime(const HostRuntime&) = delete;
  HostRuntime& operator=(const HostRuntime&) = delete;

  // Loads every enabled group and serves their endpoints. Fails when a required group cannot be loaded, when no
  // group can be served, or when a socket cannot be created (another host serves it); nothing is left behind then.
  Status Start(const HostConfig& config);

  // Loads and initialises every enabled group of `config` as Start does, checks what Start checks before serving
  // (the endpoint directory), then shuts the libraries down again; claims no socket and serves nothing.
  static StartCheck CheckStart(const HostConfig& config);

  // Applies `config` (or refuses it whole when it is an error) as PlanReload plans it: new groups start, removed
  // groups drain and stop, changed groups are loaded anew beside the old instance, which drains once the new one
  // serves, groups whose lists changed are bound again. One reload at a time; safe from any thread.
  ReloadReport Reload(const StatusOr<HostConfig>& config);

  // Says that the host is stopping, from any thread and without waiting: a reload under way gives up the loads it
  // still waits for and changes nothing more, and the shutdown's deadline counts from now. Idempotent.
  void BeginShutdown();

  // Stops accepting, lets calls in flight finish for up to the configured timeout (counted from BeginShutdown),
  // answers the rest, shuts the libraries down and removes the socket files. Returns the calls ("group /method")
  // still running in a library at the deadline; their libraries stay loaded and the caller should exit without
  // waiting for them (so too when GroupRuntime::LibraryCodeMayRun() says so: a reload left one running, or gave
  // up a load).
  std::vector<std::string> Shutdown();

  // shutdown_timeout_seconds as it applies now; readable from any thread without waiting.
  std::chrono::milliseconds shutdown_timeout() const {
    return std::chrono::milliseconds(shutdown_timeout_ms_.load(std::memory_order_relaxed));
  }

  std::vector<std::string> socket_paths() const;
  std::vector<GroupState> Describe() const;
  // A copy of the endpoint `name` as served now (for the admin's Descriptors); NotFound when none is.
  StatusOr<Endpoint> FindEndpoint(const std::string& name) const;
  std::string endpoint_dir() const;

  // Runs `fn` (on a thread of the host's) once the streams open fall back after a burst, when the memory they held
  // may be given back to the system. Set before Start.
  void OnStreamBurstEnded(std::function<void()> fn) { on_stream_burst_ended_ = std::move(fn); }

 private:
  using Runtimes = std::map<std::string, std::shared_ptr<GroupRuntime>>;

  // Every enabled group of `config` loaded, in name order, each checked against those loaded before it; the
  // refusals logged as a start (or, with `keep_going`, as a check) says them. A refusal that stops the host
  // (RefusalStopsTheHost) ends the loading unless `keep_going`.
  struct LoadedGroups {
    Runtimes groups;
    std::vector<std::string> skipped;  // optional groups that failed, and why
    std::vector<std::string> refused;  // failures that stop a start
    Status fatal;                      // the first of those, as Start returns it
  };
  // Each library's load may take load_timeout_seconds, and ends early when `stop` turns true.
  static LoadedGroups LoadGroups(const HostConfig& config, bool keep_going, const std::atomic<bool>& stop);
  // The endpoints of every instance in `runtimes` except `skip`, for conflict checks when loading.
  static EndpointRegistry RegistryOf(const Runtimes& runtimes, const std::string& skip);
  // What an endpoint of `runtime` is bound to: its methods, its instance, its limits, its group's authorization
  // and the call observers.
  std::shared_ptr<const EndpointBinding> BindingOf(const Endpoint& endpoint,
                                                   const std::shared_ptr<GroupRuntime>& runtime) const;
  // The authorization of every enabled group of `config`.
  static std::map<std::string, std::shared_ptr<const Authorization>> AuthorizationOf(const HostConfig& config);
  // Serves (or rebinds, when it exists) every endpoint of `runtime`.
  Status Serve(const std::shared_ptr<GroupRuntime>& runtime);
  // Closes the sockets of endpoints bound to `runtime` (except those in `keep`), then ends their servers.
  void Unserve(const GroupRuntime& runtime, const std::map<std::string, Endpoint>& keep,
               std::chrono::system_clock::time_point deadline);
  // Drains and stops instances in parallel; lines for the calls that outlived the deadline.
  // Tells the health service of every endpoint bound to `runtime` whether it serves.
  void SetHealth(const GroupRuntime& runtime, bool serving);
  // After a reload: instances still marked reloading serve again, and so do their endpoints.
  void EndReload();
  static std::vector<std::string> StopAll(const std::vector<std::shared_ptr<GroupRuntime>>& runtimes,
                                          std::chrono::steady_clock::time_point deadline);
  // Publishes the lists of authorization_ for Listed. With mu_.
  void PublishCallerLists();
  // Whether any enabled group's lists name `peer` (or a group has none); for the accept loop, without mu_.
  bool Listed(const PeerCredentials& peer) const;
  // Publishes what Describe and FindEndpoint read: groups_, the instances in `draining` and the endpoints. With mu_.
  void Publish(const std::vector<std::shared_ptr<GroupRuntime>>& draining = {});

  // What the admin reads, as of the last Publish.
  struct Snapshot {
    std::string endpoint_dir;
    std::vector<std::pair<GroupState, std::shared_ptr<GroupRuntime>>> groups;  // usage and state are read live
    std::map<std::string, std::shared_ptr<const EndpointBinding>> endpoints;
  };
  std::atomic<std::shared_ptr<const Snapshot>> snapshot_{std::make_shared<const Snapshot>()};
  // authorization_'s values, for Listed.
  std::atomic<std::shared_ptr<const std::vector<std::shared_ptr<const Authorization>>>> caller_lists_{
      std::make_shared<const std::vector<std::shared_ptr<const Authorization>>>()};
  std::atomic<bool> stopping_{false};                // BeginShutdown was called
  std::atomic<int64_t> stop_requested_ns_{0};        // when, on the steady clock
  std::atomic<int64_t> shutdown_timeout_ms_{30000};  // config_.shutdown_timeout, for readers without mu_

  mutable std::mutex mu_;  // one Start/Reload/Shutdown at a time; guards everything below
  HostConfig config_;
  SocketAccess socket_access_;  // who may connect to the endpoint sockets, as the start set it
  Runtimes groups_;             // by [groups.<name>]
  std::map<std::string, std::unique_ptr<EndpointServer>> endpoints_;  // by endpoint name
  AcceptLoop accept_loop_;
  std::shared_ptr<StreamAccounts> streams_;  // every endpoint's streams; made by Start
  std::function<void()> on_stream_burst_ended_;
  std::vector<std::shared_ptr<CallObserver>> call_observers_;                  // every endpoint's (metrics, audit)
  std::shared_ptr<AuditLog> audit_ = std::make_shared<AuditLog>();             // in call_observers_; off until opened
  std::map<std::string, std::shared_ptr<const Authorization>> authorization_;  // by [groups.<name>]; null: open
  std::unique_ptr<Metrics> metrics_;                                           // when [host] metrics_address is set
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace csi_proxy::host

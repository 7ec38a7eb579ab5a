// See host_runtime.h.
#include "runtime/host_runtime.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <thread>

#include "abi/peer_process.h"
#include "config/host_keys.h"
#include "config/trusted_files.h"
#include "observe/metrics.h"
#include "runtime/reload_plan.h"
#include "serving/endpoint_socket.h"

namespace csi_proxy::host {
namespace {

template <typename Fn>
void InParallel(size_t n, Fn fn) {
  std::vector<std::thread> threads;
  for (size_t i = 0; i < n; ++i) threads.emplace_back([&fn, i] { fn(i); });
  for (auto& t : threads) t.join();
}

// The configured limits, within what the process can hold open.
ConnectionLimits ConnectionLimitsOf(const HostConfig& config) {
  ConnectionLimits limits;
  limits.max_total = ConnectionsTheProcessCanHold(static_cast<size_t>(config.max_connections));
  limits.max_per_uid = config.max_connections_per_uid > 0 ? static_cast<size_t>(config.max_connections_per_uid)
                                                          : std::max<size_t>(1, limits.max_total / 4);
  limits.max_per_uid = std::min(limits.max_per_uid, limits.max_total);
  limits.max_per_endpoint = config.max_connections_per_endpoint > 0
                                ? static_cast<size_t>(config.max_connections_per_endpoint)
                                : std::max<size_t>(1, limits.max_total / 2);
  limits.max_per_endpoint = std::min(limits.max_per_endpoint, limits.max_total);
  limits.max_unlisted = config.max_connections_unlisted > 0 ? static_cast<size_t>(config.max_connections_unlisted)
                                                            : std::max<size_t>(1, limits.max_total / 8);
  limits.max_unlisted = std::min(limits.max_unlisted, limits.max_total);
  limits.handshake_timeout = config.handshake_timeout;
  limits.pin_peer_process = config.check_caller_process;
  return limits;
}

StreamLimits StreamLimitsOf(const HostConfig& config) {
  StreamLimits limits;
  limits.per_connection = static_cast<uint32_t>(config.max_streams_per_connection);
  limits.per_uid = static_cast<uint32_t>(config.max_streams_per_uid);
  limits.total = static_cast<uint32_t>(config.max_streams);
  limits.health_watches = static_cast<uint32_t>(config.max_health_watches);
  limits.request_timeout = config.request_timeout;
  return limits;
}

// check_caller_process asks for a check the kernel must support: refused, not quietly skipped, where it cannot.
Status CallerProcessCheckSupported(const HostConfig& config) {
  if (!config.check_caller_process || PeerProcess::Supported()) return Status::Ok();
  return FailedPrecondition("check_caller_process needs SO_PEERPIDFD (Linux 6.5 or later), which this kernel lacks");
}

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

std::string ReloadReport::Summary() const {
  if (!config_ok) return "reload refused, nothing changed: " + Join(refused);
  std::string s = "reload finished in " + std::to_string(took.count()) + " ms: ";
  s += applied.empty() ? "nothing to change" : "applied " + Join(applied);
  if (!refused.empty()) s += "; refused " + Join(refused);
  if (!notes.empty()) s += "; " + Join(notes);
  return s;
}

Status CheckHostDirectories(const HostConfig& config) {
  // endpoint_dir is the system's: a trusted directory that exists or can be created on Linux, the pipe namespace
  // on Windows (serving/endpoint_socket.h).
  CSI_PROXY_RETURN_IF_ERROR(CheckEndpointDirectory(config));
  // Whoever can write where the admin socket or the state lies can put their own in its place.
  CSI_PROXY_RETURN_IF_ERROR(CheckTrustedDirectory(std::filesystem::path(config.admin_socket).parent_path().string(),
                                                  "the directory of admin_socket"));
  CSI_PROXY_RETURN_IF_ERROR(CheckTrustedDirectory(config.state_dir, "state_dir"));
  if (!config.audit_log.empty() && config.audit_log != "-") {
    CSI_PROXY_RETURN_IF_ERROR(CheckTrustedDirectory(std::filesystem::path(config.audit_log).parent_path().string(),
                                                    "the directory of audit_log"));
  }
  return Status::Ok();
}

std::vector<std::string> PathWarnings(const HostConfig& config) {
  std::vector<std::string> out;
  std::vector<std::string> roots = config.working_dirs;
  roots.insert(roots.begin(), config.kubelet_path);
  for (const auto& dir : roots) {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) {
      out.push_back((dir == config.kubelet_path ? "kubelet_path " : "working dir ") + dir + " does not exist (yet)");
    }
  }
  return out;
}

Status ClaimHost(const HostConfig& config) {
  CSI_PROXY_RETURN_IF_ERROR(CheckHostDirectories(config));
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(config.endpoint_dir, ec)) {
    if (entry.path().filename().string().rfind("csi-proxy-", 0) == 0) {
      CSI_PROXY_RETURN_IF_ERROR(RequireNotServed(entry.path().string()));
    }
  }
  CSI_PROXY_RETURN_IF_ERROR(RequireNotServed(config.admin_socket));
  CSI_PROXY_RETURN_IF_ERROR(LockDirectory(config.state_dir));
  // Again, now that the lock created what was missing of it.
  return CheckTrustedDirectory(config.state_dir, "state_dir");
}

HostRuntime::~HostRuntime() { Shutdown(); }

EndpointRegistry HostRuntime::RegistryOf(const Runtimes& runtimes, const std::string& skip) {
  EndpointRegistry registry;
  for (const auto& [name, runtime] : runtimes) {
    if (name == skip) continue;
    registry.Commit(runtime->group(), runtime->library(), runtime->services());
  }
  return registry;
}

std::shared_ptr<const EndpointBinding> HostRuntime::BindingOf(const Endpoint& endpoint,
                                                              const std::shared_ptr<GroupRuntime>& runtime) const {
  auto observers = call_observers_;
  if (metrics_) observers.push_back(metrics_->ObserverFor(endpoint));
  auto authorization = authorization_.find(runtime->name());
  return std::make_shared<EndpointBinding>(
      EndpointBinding{&endpoint, runtime, runtime->max_request_bytes(), std::move(observers),
                      authorization != authorization_.end() ? authorization->second : nullptr});
}

std::map<std::string, std::shared_ptr<const Authorization>> HostRuntime::AuthorizationOf(const HostConfig& config) {
  std::map<std::string, std::shared_ptr<const Authorization>> out;
  for (const auto& g : config.groups) {
    if (g.enabled) out[g.name] = Authorization::Of(g.name, MergeAccessLists(config.access, g.access));
  }
  return out;
}

void HostRuntime::SetHealth(const GroupRuntime& runtime, bool serving) {
  for (auto& [name, server] : endpoints_) {
    if (server->binding()->dispatcher.get() == &runtime) server->SetServing(serving);
  }
}

void HostRuntime::EndReload() {
  for (auto& [name, runtime] : groups_) {
    if (runtime->state() != GroupRuntime::State::kReloading) continue;
    runtime->set_state(GroupRuntime::State::kServing);
  }
  for (auto& [name, runtime] : groups_) SetHealth(*runtime, runtime->state() == GroupRuntime::State::kServing);
}

Status HostRuntime::Serve(const std::shared_ptr<GroupRuntime>& runtime) {
  // New sockets first: if one cannot be created, nothing has changed yet.
  std::vector<std::string> created;
  Status failed;
  for (const auto& [name, endpoint] : runtime->endpoints()) {
    if (endpoints_.count(name)) continue;
    auto server = std::make_unique<EndpointServer>(EndpointPath(config_.endpoint_dir, name),
                                                   BindingOf(endpoint, runtime), streams_);
    // gRPC refuses a larger message before it is read whole; the router checks again for a limit a reload lowered.
    failed = server->Start(socket_access_, static_cast<int>(runtime->max_request_bytes()), config_.idle_timeout);
    if (!failed.ok()) break;
    endpoints_[name] = std::move(server);
    created.push_back(name);
  }
  if (!failed.ok()) {
    for (const auto& name : created) endpoints_.erase(name);
    return failed;
  }
  for (const auto& [name, endpoint] : runtime->endpoints()) {
    EndpointServer* server = endpoints_.at(name).get();
    if (std::find(created.begin(), created.end(), name) != created.end()) {
      accept_loop_.Add(*server->socket(),
                       [server](Connection conn, const PeerCredentials& peer) { server->Adopt(conn, peer); });
    } else {
      server->Rebind(BindingOf(endpoint, runtime));
    }
  }
  return Status::Ok();
}

void HostRuntime::Unserve(const GroupRuntime& runtime, const std::map<std::string, Endpoint>& keep,
                          std::chrono::system_clock::time_point deadline) {
  std::vector<std::unique_ptr<EndpointServer>> going;
  for (auto it = endpoints_.begin(); it != endpoints_.end();) {
    if (it->second->binding()->dispatcher.get() != &runtime || keep.count(it->first)) {
      ++it;
      continue;
    }
    accept_loop_.Remove(*it->second->socket());
    it->second->CloseSocket();
    going.push_back(std::move(it->second));
    it = endpoints_.erase(it);
  }
  InParallel(going.size(), [&](size_t i) { going[i]->Stop(deadline); });
}

std::vector<std::string> HostRuntime::StopAll(const std::vector<std::shared_ptr<GroupRuntime>>& runtimes,
                                              std::chrono::steady_clock::time_point deadline) {
  // One after the other: the deadline is absolute, so the whole stays bounded by it.
  std::vector<std::string> lines;
  for (const auto& runtime : runtimes) {
    std::string what = runtime->name() + " (" + runtime->library() + ")";
    std::vector<std::string> running = runtime->Stop(deadline);
    if (running.empty()) continue;
    std::string line = "group " + what + " still runs " + Join(running) + " past the timeout; its library stays loaded";
    spdlog::warn("{}", line);
    lines.push_back(line);
  }
  return lines;
}

HostRuntime::LoadedGroups HostRuntime::LoadGroups(const HostConfig& config, bool keep_going,
                                                  const std::atomic<bool>& stop) {
  LoadedGroups out;
  for (const auto& group : config.groups) {
    if (!group.enabled) {
      spdlog::info("group '{}' is disabled in the configuration", group.name);
      continue;
    }
    auto runtime = GroupRuntime::LoadWithin(group, config, RegistryOf(out.groups, ""),
                                            std::chrono::steady_clock::now() + config.load_timeout, stop);
    if (!runtime.ok()) {
      const std::string& why = runtime.status().message();
      bool fatal = RefusalStopsTheHost(group, runtime.status());
      if (keep_going) {
        spdlog::error("{}{}", why, fatal ? " (a start would be refused)" : " (would be skipped)");
      } else {
        spdlog::error(
            "{}{}", why,
            fatal ? (group.required ? " (required: refusing to start)" : " (a configuration error: refusing to start)")
                  : " (skipped)");
      }
      (fatal ? out.refused : out.skipped).push_back(why);
      if (fatal && out.fatal.ok()) {
        out.fatal = Status(runtime.status().code(), std::string(group.required ? "required " : "") + "group '" +
                                                        group.name + "' failed to load: " + why);
      }
      if (fatal && !keep_going) break;
      continue;
    }
    const GroupRuntime& p = **runtime;
    spdlog::info("group '{}' loaded from {} (plugin version {}, ABI {}{})", p.name(), p.library(), p.plugin_version(),
                 p.abi_version(), p.isolation() == Isolation::kProcess ? ", in a runner process of its own" : "");
    for (const auto& v : p.skipped_versions()) {
      spdlog::info("group '{}': not serving {} (not in versions)", p.name(), v);
    }
    out.groups[group.name] = std::move(*runtime);
  }
  return out;
}

StartCheck HostRuntime::CheckStart(const HostConfig& config) {
  const std::atomic<bool> never{false};
  HostConfig checked = config;
  checked.check_only = true;  // the groups' inits must leave a running host's state alone
  LoadedGroups loaded = LoadGroups(checked, /*keep_going=*/true, never);
  StartCheck check;
  for (const auto& [name, runtime] : loaded.groups) {
    for (const auto& [endpoint_name, endpoint] : runtime->endpoints()) check.endpoints[endpoint_name] = endpoint;
  }
  check.skipped = std::move(loaded.skipped);
  check.refused = std::move(loaded.refused);
  if (check.endpoints.empty()) check.refused.push_back("nothing would be served");
  if (Status dirs = CheckHostDirectories(config); !dirs.ok()) check.refused.push_back(dirs.message());
  if (Status pinning = CallerProcessCheckSupported(config); !pinning.ok()) check.refused.push_back(pinning.message());
  check.warnings = PathWarnings(config);
  if (std::error_code ec; !config.audit_log.empty() && config.audit_log != "-" &&
                          !std::filesystem::is_directory(std::filesystem::path(config.audit_log).parent_path(), ec)) {
    check.warnings.push_back("the directory of audit_log, " +
                             std::filesystem::path(config.audit_log).parent_path().string() +
                             ", does not exist (yet): a start cannot open the audit log until it does (the systemd "
                             "unit's LogsDirectory= creates /var/log/csi-proxy)");
  }
  // Shut the libraries down as a shutdown does: in the reverse of the order they were loaded in.
  std::vector<std::shared_ptr<GroupRuntime>> all;
  for (auto it = loaded.groups.rbegin(); it != loaded.groups.rend(); ++it) all.push_back(it->second);
  loaded.groups.clear();
  StopAll(all, std::chrono::steady_clock::now());
  return check;
}

Status HostRuntime::Start(const HostConfig& config) {
  std::lock_guard lock(mu_);
  config_ = config;
  CSI_PROXY_ASSIGN_OR_RETURN(socket_access_, SocketAccessOf(config));
  CSI_PROXY_RETURN_IF_ERROR(CallerProcessCheckSupported(config));
  CSI_PROXY_RETURN_IF_ERROR(audit_->Open(config));
  call_observers_.push_back(audit_);
  if (!config.metrics_address.empty()) {
    auto metrics = Metrics::Start(config.metrics_address);
    if (!metrics.ok()) return metrics.status();
    metrics_ = std::move(*metrics);
    metrics_->TrackAudit(audit_);
    spdlog::info("metrics on http://{}/metrics", config.metrics_address);
  }
  shutdown_timeout_ms_.store(config.shutdown_timeout.count());
  LoadedGroups loaded = LoadGroups(config, /*keep_going=*/false, stopping_);
  groups_ = std::move(loaded.groups);  // the shutdown unloads what did load, should the start fail
  if (!loaded.fatal.ok()) return loaded.fatal;
  if (metrics_) {
    for (const auto& [name, runtime] : groups_) metrics_->Track(runtime);
  }
  if (groups_.empty()) return FailedPrecondition("nothing to serve: no enabled group could be loaded");
  for (const auto& warning : PathWarnings(config)) spdlog::warn("{}", warning);
  CSI_PROXY_RETURN_IF_ERROR(CreateEndpointDirectory(config.endpoint_dir));
  authorization_ = AuthorizationOf(config);
  PublishCallerLists();
  streams_ = std::make_shared<StreamAccounts>(StreamLimitsOf(config));
  if (on_stream_burst_ended_) streams_->OnBurstEnded(on_stream_burst_ended_);
  for (const auto& [name, runtime] : groups_) CSI_PROXY_RETURN_IF_ERROR(Serve(runtime));
  ConnectionLimits limits = ConnectionLimitsOf(config);
  limits.listed = [this](const PeerCredentials& peer) { return Listed(peer); };
  CSI_PROXY_RETURN_IF_ERROR(accept_loop_.Start(limits));
  started_ = true;
  Publish();
  return Status::Ok();
}

ReloadReport HostRuntime::Reload(const StatusOr<HostConfig>& loaded) {
  auto started = std::chrono::steady_clock::now();
  ReloadReport report;
  if (!loaded.ok()) {
    report.config_ok = false;
    report.refused.push_back(loaded.status().message());
    spdlog::error("{}", report.Summary());
    std::lock_guard lock(mu_);
    if (metrics_) metrics_->CountReload("refused");
    return report;
  }
  std::lock_guard lock(mu_);
  if (!started_ || stopped_ || stopping_.load()) {
    report.refused.push_back(!started_ ? "the host is still starting" : "the host is stopping");
    if (metrics_) metrics_->CountReload("refused");
    return report;
  }
  std::map<std::string, std::string> instances;
  for (const auto& [name, runtime] : groups_) {
    // An isolated group that failed is loaded again (a new runner) even when nothing about it changed.
    instances[name] =
        runtime->state() == GroupRuntime::State::kFailed ? "failed\n" + runtime->fingerprint() : runtime->fingerprint();
  }
  std::map<std::string, std::string> identities;
  for (const auto& g : loaded->groups) {
    if (g.enabled) identities[g.library] = LibraryFileIdentity(g.library);
  }
  ReloadPlan plan = PlanReload(config_, *loaded, instances, identities);
  HostConfig& next = plan.config;
  report.notes = plan.notes;

  // [host] keys that apply now. The audit log is reopened at every reload, so that logrotate can move the file.
  for (const std::string& key : plan.host_keys_now) {
    if (key != "log_level") continue;
    spdlog::set_level(spdlog::level::from_str(next.log_level));
    for (const auto& [name, runtime] : groups_) runtime->SetLogLevel(next.log_level);
  }
  Status audit = audit_->Open(next);
  if (!audit.ok()) {
    report.refused.push_back(audit.message() + " (the audit log stays as it was)");
    next.audit_log = config_.audit_log;
    next.audit_log_overflow = config_.audit_log_overflow;
  }
  for (const HostKey& key : HostKeys()) {
    if (std::find(plan.host_keys_now.begin(), plan.host_keys_now.end(), key.name) == plan.host_keys_now.end()) continue;
    if ((key.name == "audit_log" || key.name == "audit_log_overflow") && !audit.ok()) continue;
    report.applied.push_back(std::string(key.name) + " " + HostKeyValueText(key, next));
  }

  // A group being replaced does not serve (health) until its old instance has drained.
  for (const std::string& name : plan.replace) {
    groups_.at(name)->set_state(GroupRuntime::State::kReloading);
    SetHealth(*groups_.at(name), false);
  }

  // Load the new instances beside the old ones; a failure leaves that group as it was.
  std::map<std::string, const GroupConfig*> configs;
  for (const auto& g : next.groups) configs[g.name] = &g;
  Runtimes after = groups_;
  for (const std::string& name : plan.remove) after.erase(name);
  std::map<std::string, std::shared_ptr<GroupRuntime>> loaded_now;
  std::vector<std::string> to_load = plan.replace;
  to_load.insert(to_load.end(), plan.add.begin(), plan.add.end());
  // Each load has a deadline of its own: an init that does not return by then fails its group's change.
  Publish();
  for (const std::string& name : to_load) {
    const GroupConfig& g = *configs.at(name);
    auto runtime = GroupRuntime::LoadWithin(g, next, RegistryOf(after, name),
                                            std::chrono::steady_clock::now() + next.load_timeout, stopping_);
    const bool stopping = stopping_.load();
    if (!runtime.ok() && (runtime.status().code() == Code::kInvalidArgument || stopping)) {
      // A mistake in a group's keys is a mistake in the file: nothing of this reload is applied. Nor is anything
      // once the host is stopping.
      std::vector<std::shared_ptr<GroupRuntime>> discarded;
      for (auto& [loaded_name, r] : loaded_now) discarded.push_back(r);
      StopAll(discarded, std::chrono::steady_clock::now());
      report.config_ok = stopping;
      report.applied.clear();
      report.refused = {runtime.status().message()};
      if (stopping) report.refused.push_back("the host is stopping: nothing of this reload was applied");
      spdlog::error("{}", report.Summary());
      EndReload();
      Publish();
      if (metrics_) metrics_->CountReload("refused");
      return report;
    }
    if (!runtime.ok()) {
      report.refused.push_back(runtime.status().message() +
                               (groups_.count(name) ? " (the loaded instance keeps serving)" : ""));
      continue;
    }
    if (metrics_) metrics_->Track(*runtime);
    after[name] = *runtime;
    loaded_now[name] = *runtime;
  }
  for (const std::string& name : plan.keep) groups_.at(name)->set_required(configs.at(name)->required);

  // Apply: stop serving removed groups, serve new instances (with the new authorization), then drain what they
  // replace.
  authorization_ = AuthorizationOf(next);
  PublishCallerLists();
  auto grace = next.shutdown_timeout;
  auto system_deadline = std::chrono::system_clock::now() + grace;
  auto steady_deadline = std::chrono::steady_clock::now() + grace;
  std::vector<std::shared_ptr<GroupRuntime>> draining;
  for (const std::string& name : plan.remove) {
    std::shared_ptr<GroupRuntime> runtime = groups_.at(name);
    runtime->set_state(GroupRuntime::State::kDraining);
    SetHealth(*runtime, false);
    Unserve(*runtime, {}, system_deadline);
    groups_.erase(name);
    draining.push_back(runtime);
    report.applied.push_back("group '" + name + "' disabled");
  }
  for (const auto& [name, runtime] : loaded_now) {
    Status served = Serve(runtime);
    auto old = groups_.find(name);
    if (!served.ok()) {
      draining.push_back(runtime);
      report.refused.push_back("group '" + name + "': " + served.message());
      continue;
    }
    if (old == groups_.end()) {
      report.applied.push_back("group '" + name + "' enabled (" + runtime->library() + ")");
    } else {
      Unserve(*old->second, runtime->endpoints(), system_deadline);
      draining.push_back(old->second);
      report.applied.push_back("group '" + name + "' reloaded (" + runtime->library() + ", plugin version " +
                               runtime->plugin_version() + ")");
    }
    groups_[name] = runtime;
  }
  // The authorization lists are the host's: an instance that stays takes new ones without reloading its library.
  for (const std::string& name : plan.rebind) {
    auto it = groups_.find(name);
    if (it == groups_.end()) continue;
    if (auto fresh = loaded_now.find(name); fresh != loaded_now.end() && fresh->second == it->second) continue;
    Status rebound = Serve(it->second);
    if (rebound.ok()) {
      report.applied.push_back("group '" + name + "' authorization lists (the library was not reloaded)");
    } else {
      report.refused.push_back("group '" + name + "' authorization lists: " + rebound.message());
    }
  }
  shutdown_timeout_ms_.store(next.shutdown_timeout.count());
  Publish(draining);
  auto leftovers = StopAll(draining, steady_deadline);
  report.notes.insert(report.notes.end(), leftovers.begin(), leftovers.end());
  EndReload();
  if (metrics_) {
    for (const auto& runtime : draining) metrics_->Retire(*runtime);
    metrics_->CountReload(report.refused.empty() ? "ok" : "partial");
  }
  config_ = next;
  Publish();
  report.took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  (report.refused.empty() ? spdlog::info("{}", report.Summary()) : spdlog::warn("{}", report.Summary()));
  return report;
}

void HostRuntime::BeginShutdown() {
  int64_t unset = 0;
  stop_requested_ns_.compare_exchange_strong(unset, std::chrono::steady_clock::now().time_since_epoch().count());
  stopping_.store(true);
}

std::vector<std::string> HostRuntime::Shutdown() {
  BeginShutdown();
  // A reload under way ends soon: it gives its loads up, and its drain ends before this one's deadline.
  std::lock_guard lock(mu_);
  if (stopped_) return {};
  stopped_ = true;
  accept_loop_.Stop();
  for (auto& [name, server] : endpoints_) {
    server->SetServing(false);
    server->CloseSocket();
  }
  // Counted from the stop request, however long a reload held the lock meanwhile.
  const auto requested =
      std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(stop_requested_ns_.load()));
  const auto steady_deadline = requested + config_.shutdown_timeout;
  const auto system_deadline =
      std::chrono::system_clock::now() + std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                             steady_deadline - std::chrono::steady_clock::now());
  std::vector<EndpointServer*> servers;
  for (auto& [name, server] : endpoints_) servers.push_back(server.get());
  InParallel(servers.size(), [&](size_t i) { servers[i]->Stop(system_deadline); });
  endpoints_.clear();
  // No stream is left: the reaper ends here, and with it the calls of the burst function `main` gave.
  streams_.reset();
  std::vector<std::shared_ptr<GroupRuntime>> all;
  // Shut the libraries down in the reverse of the order they were loaded in (by name).
  for (auto it = groups_.rbegin(); it != groups_.rend(); ++it) all.push_back(it->second);
  groups_.clear();
  Publish();
  std::vector<std::string> still_running = StopAll(all, steady_deadline);
  // The lines of the calls just answered are written before the host exits; a sink that takes nothing holds the
  // exit two seconds at most (what it did not take is counted lost).
  audit_->Close(std::chrono::seconds(2));
  return still_running;
}

void HostRuntime::PublishCallerLists() {
  auto lists = std::make_shared<std::vector<std::shared_ptr<const Authorization>>>();
  for (const auto& [name, authorization] : authorization_) lists->push_back(authorization);
  caller_lists_.store(std::move(lists));
}

bool HostRuntime::Listed(const PeerCredentials& peer) const {
  std::shared_ptr<const std::vector<std::shared_ptr<const Authorization>>> lists = caller_lists_.load();
  // A group without lists admits whoever the socket does: then every caller counts as named.
  return std::any_of(lists->begin(), lists->end(), [&](const auto& a) { return !a || a->Names(peer); });
}

void HostRuntime::Publish(const std::vector<std::shared_ptr<GroupRuntime>>& draining) {
  auto snapshot = std::make_shared<Snapshot>();
  snapshot->endpoint_dir = config_.endpoint_dir;
  auto add = [&](const std::string& name, const std::shared_ptr<GroupRuntime>& runtime) {
    GroupState g{name,
                 runtime->group(),
                 runtime->library(),
                 runtime->plugin_version(),
                 runtime->abi_version(),
                 {},
                 runtime->limits(),
                 {}};
    g.isolation = IsolationName(runtime->isolation());
    for (const auto& [endpoint, e] : runtime->endpoints()) {
      g.endpoints.push_back(endpoint);
      for (const auto& [method, handler] : e.methods) {
        if (handler.read_only()) g.read_only_methods.push_back(method);
      }
    }
    std::sort(g.read_only_methods.begin(), g.read_only_methods.end());
    g.privileges = runtime->privileges();
    snapshot->groups.emplace_back(std::move(g), runtime);
  };
  for (const auto& [name, runtime] : groups_) add(name, runtime);
  for (const auto& runtime : draining) add(runtime->name(), runtime);
  for (const auto& [name, server] : endpoints_) snapshot->endpoints[name] = server->binding();
  snapshot_.store(std::move(snapshot));
}

std::vector<GroupState> HostRuntime::Describe() const {
  std::shared_ptr<const Snapshot> snapshot = snapshot_.load();
  std::vector<GroupState> out;
  for (const auto& [state, runtime] : snapshot->groups) {
    GroupState g = state;
    g.usage = runtime->usage();
    g.required = runtime->required();
    g.state = GroupRuntime::StateName(runtime->state());
    out.push_back(std::move(g));
  }
  return out;
}

StatusOr<Endpoint> HostRuntime::FindEndpoint(const std::string& name) const {
  std::shared_ptr<const Snapshot> snapshot = snapshot_.load();
  auto it = snapshot->endpoints.find(name);
  if (it == snapshot->endpoints.end()) return NotFound("no endpoint " + name + " is served");
  return *it->second->endpoint;
}

std::string HostRuntime::endpoint_dir() const { return snapshot_.load()->endpoint_dir; }

std::vector<std::string> HostRuntime::socket_paths() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& [name, server] : endpoints_) out.push_back(server->path());
  return out;
}

}  // namespace csi_proxy::host

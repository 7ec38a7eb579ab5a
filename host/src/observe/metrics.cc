// See metrics.h.
#include "observe/metrics.h"

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace csi_proxy::host {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// grpc_code values: the names Go's codes.Code prints, as upstream's middleware labels them.
constexpr std::array<const char*, 17> kCodeNames = {
    "OK",       "Canceled",       "Unknown",          "InvalidArgument",   "DeadlineExceeded",
    "NotFound", "AlreadyExists",  "PermissionDenied", "ResourceExhausted", "FailedPrecondition",
    "Aborted",  "OutOfRange",     "Unimplemented",    "Internal",          "Unavailable",
    "DataLoss", "Unauthenticated"};
constexpr size_t kUnknownCode = 2;

// The buckets upstream csi-proxy gives grpc_server_handling_seconds (seconds).
const prometheus::Histogram::BucketBoundaries& HandlingBuckets() {
  static const prometheus::Histogram::BucketBoundaries kBuckets = {0.001, 0.01, 0.1, 0.3, 0.6, 1,  3,
                                                                   6,     9,    20,  30,  60,  90, 120};
  return kBuckets;
}

}  // namespace

// The registered series families, shared by the endpoint observers (which may outlive a reload's binding).
struct MetricFamilies {
  std::shared_ptr<prometheus::Registry> registry;
  prometheus::Family<prometheus::Counter>* started;
  prometheus::Family<prometheus::Counter>* handled;
  prometheus::Family<prometheus::Counter>* received;
  prometheus::Family<prometheus::Counter>* sent;
  prometheus::Family<prometheus::Histogram>* handling_seconds;
  prometheus::Family<prometheus::Counter>* unknown_methods;
  prometheus::Family<prometheus::Counter>* reloads;
};

namespace {

// Records one endpoint's calls. Every series of a method but grpc_server_handled_total is created when the
// binding is built; a (method, code) pair's series is created by its first call, so the exposition holds only
// codes that happened, as upstream's does.
class EndpointMetrics final : public CallObserver {
 public:
  EndpointMetrics(std::shared_ptr<const MetricFamilies> families, const Endpoint& endpoint)
      : families_(std::move(families)) {
    unknown_ = &families_->unknown_methods->Add({{"endpoint", endpoint.name}});
    for (const auto& [path, handler] : endpoint.methods) {
      // path: /<package>.<Service>/<Method>
      size_t slash = path.rfind('/');
      auto series = std::make_unique<MethodSeries>();
      series->labels = {
          {"grpc_type", "unary"}, {"grpc_service", path.substr(1, slash - 1)}, {"grpc_method", path.substr(slash + 1)}};
      series->started = &families_->started->Add(series->labels);
      series->received = &families_->received->Add(series->labels);
      series->sent = &families_->sent->Add(series->labels);
      series->seconds = &families_->handling_seconds->Add(series->labels, HandlingBuckets());
      by_handler_.emplace(&handler, std::move(series));
    }
  }

  void OnStarted(const Endpoint&, std::string_view, const MethodHandler* handler) override {
    // Unknown paths get no grpc_server series (any client could make their label values up).
    MethodSeries* series = Find(handler);
    if (series == nullptr) return unknown_->Increment();
    series->started->Increment();
    series->received->Increment();
  }

  void OnFinished(const CallEvent& event) override {
    MethodSeries* series = Find(event.handler);
    if (series == nullptr) return;
    size_t code = static_cast<size_t>(event.code) < kCodeNames.size() ? static_cast<size_t>(event.code) : kUnknownCode;
    prometheus::Counter* handled = series->handled[code].load(std::memory_order_acquire);
    if (handled == nullptr) {
      // Family::Add returns the existing series for the same labels, so two first calls racing here agree.
      auto labels = series->labels;
      labels["grpc_code"] = kCodeNames[code];
      handled = &families_->handled->Add(labels);
      series->handled[code].store(handled, std::memory_order_release);
    }
    handled->Increment();
    series->seconds->Observe(std::chrono::duration<double>(event.elapsed).count());
    if (event.code == CSI_PROXY_STATUS_OK) series->sent->Increment();
  }

 private:
  struct MethodSeries {
    prometheus::Labels labels;
    prometheus::Counter* started = nullptr;
    prometheus::Counter* received = nullptr;
    prometheus::Counter* sent = nullptr;
    prometheus::Histogram* seconds = nullptr;
    std::array<std::atomic<prometheus::Counter*>, kCodeNames.size()> handled{};
  };

  MethodSeries* Find(const MethodHandler* handler) const {
    if (handler == nullptr) return nullptr;
    auto it = by_handler_.find(handler);
    return it == by_handler_.end() ? nullptr : it->second.get();
  }

  std::shared_ptr<const MetricFamilies> families_;
  prometheus::Counter* unknown_;
  // Keyed by the handler's address in the endpoint, which the router hands over: no string is hashed per call.
  std::unordered_map<const MethodHandler*, std::unique_ptr<MethodSeries>> by_handler_;
};

ClientMetric Sample(std::vector<ClientMetric::Label> labels, double value, MetricType type) {
  ClientMetric m;
  m.label = std::move(labels);
  (type == MetricType::Counter ? m.counter.value : m.gauge.value) = value;
  return m;
}

}  // namespace

// The groups' series, read from the live instances at each scrape.
class GroupCollector final : public prometheus::Collectable {
 public:
  void Track(const std::shared_ptr<GroupRuntime>& runtime) {
    Tracked t;
    t.runtime = runtime;
    t.name = runtime->name();
    t.group = runtime->group();
    t.library = runtime->library();
    t.plugin_version = runtime->plugin_version();
    t.abi_version = std::to_string(runtime->abi_version());
    for (const auto& [endpoint, e] : runtime->endpoints()) t.endpoints.emplace_back(e.version, endpoint);
    std::lock_guard lock(mu_);
    tracked_.push_back(std::move(t));
  }

  void Retire(const GroupRuntime& runtime) {
    std::lock_guard lock(mu_);
    for (auto it = tracked_.begin(); it != tracked_.end(); ++it) {
      if (it->runtime.lock().get() != &runtime) continue;
      GroupRuntime::Usage usage = runtime.usage();
      retired_refused_[it->name] += usage.executor.refused;
      if (runtime.isolation() == Isolation::kProcess) retired_restarts_[it->name] += usage.runner.restarts;
      tracked_.erase(it);
      return;
    }
  }

  std::vector<MetricFamily> Collect() const override {
    struct Sum {
      const GroupRuntime* newest = nullptr;
      const Tracked* info = nullptr;
      GroupRuntime::State state = GroupRuntime::State::kStopped;
      double in_flight = 0, busy = 0, queued = 0, refused = 0, workers = 0;
      bool isolated = false;
      double restarts = 0, runner_up = 0;
    };
    std::map<std::string, Sum> sums;
    std::vector<std::shared_ptr<GroupRuntime>> alive;  // held while reading them
    std::lock_guard lock(mu_);
    for (const auto& [name, refused] : retired_refused_) sums[name].refused = static_cast<double>(refused);
    for (const auto& [name, restarts] : retired_restarts_) sums[name].restarts = static_cast<double>(restarts);
    for (const auto& t : tracked_) {
      auto runtime = t.runtime.lock();
      if (!runtime) continue;
      alive.push_back(runtime);
      Sum& s = sums[t.name];
      GroupRuntime::Usage u = runtime->usage();
      s.in_flight += static_cast<double>(u.in_flight);
      s.busy += u.executor.running;
      s.queued += static_cast<double>(u.executor.queued);
      s.refused += static_cast<double>(u.executor.refused);
      if (runtime->isolation() == Isolation::kProcess) {
        s.isolated = true;
        s.restarts += static_cast<double>(u.runner.restarts);
        s.runner_up = u.runner.pid != 0 ? 1 : 0;  // the newest instance's runner
      }
      // Later instances replace earlier ones; an instance that reloads or drains shows in the state.
      s.info = &t;
      s.workers = runtime->limits().workers;
      if (s.newest == nullptr || Rank(runtime->state()) > Rank(s.state)) s.state = runtime->state();
      s.newest = runtime.get();
    }

    MetricFamily info{"csi_proxy_group_info",
                      "The library serving each group and version: its file, plugin version and ABI version (1)",
                      MetricType::Gauge,
                      {}};
    MetricFamily state{
        "csi_proxy_group_state",
        "1 for the state the group is in (serving, reloading, draining, stopped, failed), 0 for the others",
        MetricType::Gauge,
        {}};
    MetricFamily in_flight{"csi_proxy_group_calls_in_flight",
                           "Calls handed to the group and not answered by it yet",
                           MetricType::Gauge,
                           {}};
    MetricFamily busy{
        "csi_proxy_group_workers_busy", "Workers of the group's budget running a handler now", MetricType::Gauge, {}};
    MetricFamily workers{
        "csi_proxy_group_workers", "The group's budget: handlers that may run at once", MetricType::Gauge, {}};
    MetricFamily queued{
        "csi_proxy_group_calls_queued", "Calls waiting for a worker of the group's budget", MetricType::Gauge, {}};
    MetricFamily refused{"csi_proxy_group_refused_total",
                         "Calls refused with RESOURCE_EXHAUSTED because the group's budget and queue were full",
                         MetricType::Counter,
                         {}};
    MetricFamily restarts{"csi_proxy_group_restarts_total",
                          "Runners of an isolated group started again after the previous one ended (a crash, an abort, "
                          "an exit, a kill, a call hung past its deadline)",
                          MetricType::Counter,
                          {}};
    MetricFamily runner_up{"csi_proxy_group_runner_up",
                           "1 when an isolated group's runner is up and serving, 0 while it restarts or has failed",
                           MetricType::Gauge,
                           {}};
    for (const auto& [name, s] : sums) {
      refused.metric.push_back(Sample({{"group", name}}, s.refused, MetricType::Counter));
      if (s.isolated || retired_restarts_.count(name)) {
        restarts.metric.push_back(Sample({{"group", name}}, s.restarts, MetricType::Counter));
      }
      if (s.isolated) runner_up.metric.push_back(Sample({{"group", name}}, s.runner_up, MetricType::Gauge));
      if (s.info == nullptr) continue;  // retired: only its refusals stay
      for (const auto& [version, endpoint] : s.info->endpoints) {
        info.metric.push_back(Sample({{"group", name},
                                      {"api_group", s.info->group},
                                      {"version", version},
                                      {"endpoint", endpoint},
                                      {"library", s.info->library},
                                      {"plugin_version", s.info->plugin_version},
                                      {"abi_version", s.info->abi_version}},
                                     1, MetricType::Gauge));
      }
      for (auto st : {GroupRuntime::State::kServing, GroupRuntime::State::kReloading, GroupRuntime::State::kDraining,
                      GroupRuntime::State::kStopped, GroupRuntime::State::kFailed}) {
        state.metric.push_back(Sample({{"group", name}, {"state", GroupRuntime::StateName(st)}}, st == s.state ? 1 : 0,
                                      MetricType::Gauge));
      }
      in_flight.metric.push_back(Sample({{"group", name}}, s.in_flight, MetricType::Gauge));
      busy.metric.push_back(Sample({{"group", name}}, s.busy, MetricType::Gauge));
      workers.metric.push_back(Sample({{"group", name}}, s.workers, MetricType::Gauge));
      queued.metric.push_back(Sample({{"group", name}}, s.queued, MetricType::Gauge));
    }
    return {info, state, in_flight, busy, workers, queued, refused, restarts, runner_up};
  }

 private:
  struct Tracked {
    std::weak_ptr<GroupRuntime> runtime;
    // Copied at load: a stopped instance no longer has its plugin.
    std::string name, group, library, plugin_version, abi_version;
    std::vector<std::pair<std::string, std::string>> endpoints;  // version, endpoint name
  };

  // Which of two instances' states a group shows: a reload or a drain in progress wins over serving.
  static int Rank(GroupRuntime::State state) {
    switch (state) {
      case GroupRuntime::State::kStopped:
        return 0;
      case GroupRuntime::State::kServing:
        return 1;
      case GroupRuntime::State::kDraining:
        return 2;
      case GroupRuntime::State::kReloading:
        return 3;
      case GroupRuntime::State::kFailed:
        return 4;
    }
    return 0;
  }

  mutable std::mutex mu_;
  std::vector<Tracked> tracked_;                      // in load order
  std::map<std::string, uint64_t> retired_refused_;   // by group name
  std::map<std::string, uint64_t> retired_restarts_;  // by group name: isolated groups' runners restarted
};

// The audit log's counters, read at each scrape.
class AuditCollector final : public prometheus::Collectable {
 public:
  explicit AuditCollector(std::shared_ptr<const AuditLog> audit) : audit_(std::move(audit)) {}

  std::vector<MetricFamily> Collect() const override {
    const AuditLog::Stats s = audit_->stats();
    auto one = [](const char* name, const char* help, MetricType type, double value,
                  std::vector<ClientMetric::Label> labels = {}) {
      return MetricFamily{name, help, type, {Sample(std::move(labels), value, type)}};
    };
    MetricFamily lost = one("csi_proxy_audit_lines_lost_total",
                            "Audit lines lost: not queued because the queue was full (queue_full), or not taken by "
                            "the file or pipe (write_failed)",
                            MetricType::Counter, static_cast<double>(s.lost_queue_full), {{"reason", "queue_full"}});
    lost.metric.push_back(
        Sample({{"reason", "write_failed"}}, static_cast<double>(s.lost_write_failed), MetricType::Counter));
    return {one("csi_proxy_audit_lines_written_total", "Audit lines written", MetricType::Counter,
                static_cast<double>(s.written)),
            std::move(lost),
            one("csi_proxy_audit_refusal_lines_not_written_total",
                "Refusal lines over a caller's budget (counted in the caller's next line)", MetricType::Counter,
                static_cast<double>(s.refusals_not_written)),
            one("csi_proxy_audit_lines_truncated_total", "Audit lines with a field cut to its bound",
                MetricType::Counter, static_cast<double>(s.truncated)),
            one("csi_proxy_audit_calls_refused_total",
                "Mutating calls refused because their audit line could not be kept (audit_log_overflow = refuse)",
                MetricType::Counter, static_cast<double>(s.calls_refused)),
            one("csi_proxy_audit_queue_bytes", "Audit lines queued and not written yet, in bytes", MetricType::Gauge,
                static_cast<double>(s.queued_bytes))};
  }

 private:
  std::shared_ptr<const AuditLog> audit_;
};

namespace {

// civetweb's options (through prometheus-cpp's Exposer): it serves a connection on one of its worker threads from
// accept to close, so a client that connects and sends nothing holds a worker until request_timeout_ms. Bounded
// that way, idle or slow connections delay a scrape by seconds, never for good: a few workers, a short queue
// of accepted connections waiting for one, no keep-alive, and every request's time bounded.
std::vector<std::string> ExposerOptions(const std::string& address) {
  return {"listening_ports",   address, "num_threads",        std::to_string(Metrics::kWorkers),
          "connection_queue",  "16",    "request_timeout_ms", std::to_string(Metrics::kRequestTimeout.count()),
          "enable_keep_alive", "no"};
}

}  // namespace

StatusOr<std::unique_ptr<Metrics>> Metrics::Start(const std::string& address) {
  std::unique_ptr<Metrics> m(new Metrics());
  m->registry_ = std::make_shared<prometheus::Registry>();
  prometheus::Registry& r = *m->registry_;
  auto f = std::make_shared<MetricFamilies>();
  f->registry = m->registry_;
  f->started = &prometheus::BuildCounter()
                    .Name("grpc_server_started_total")
                    .Help("Total number of RPCs started on the server.")
                    .Register(r);
  f->handled = &prometheus::BuildCounter()
                    .Name("grpc_server_handled_total")
                    .Help("Total number of RPCs completed on the server, regardless of success or failure.")
                    .Register(r);
  f->received = &prometheus::BuildCounter()
                     .Name("grpc_server_msg_received_total")
                     .Help("Total number of RPC stream messages received on the server.")
                     .Register(r);
  f->sent = &prometheus::BuildCounter()
                 .Name("grpc_server_msg_sent_total")
                 .Help("Total number of gRPC stream messages sent by the server.")
                 .Register(r);
  f->handling_seconds = &prometheus::BuildHistogram()
                             .Name("grpc_server_handling_seconds")
                             .Help(
                                 "Histogram of response latency (seconds) of gRPC that had been application-level "
                                 "handled by the server.")
                             .Register(r);
  f->unknown_methods = &prometheus::BuildCounter()
                            .Name("csi_proxy_unknown_method_calls_total")
                            .Help("Calls to a method path the endpoint does not serve (answered UNIMPLEMENTED)")
                            .Register(r);
  f->reloads = &prometheus::BuildCounter()
                    .Name("csi_proxy_reloads_total")
                    .Help(
                        "Configuration reloads by outcome: ok, partial (some changes refused), refused (none "
                        "applied)")
                    .Register(r);
  for (const char* result : {"ok", "partial", "refused"}) f->reloads->Add({{"result", result}});
  prometheus::BuildGauge()
      .Name("csi_proxy_build_info")
      .Help("The csi-proxy host's version (1)")
      .Register(r)
      .Add({{"version", CSI_PROXY_HOST_VERSION}})
      .Set(1);
  m->families_ = std::move(f);
  m->groups_ = std::make_shared<GroupCollector>();
  try {
    m->exposer_ = std::make_unique<prometheus::Exposer>(ExposerOptions(address));
  } catch (const std::exception& e) {
    return Unavailable("cannot serve metrics on " + address + ": " + e.what());
  }
  m->exposer_->RegisterCollectable(m->registry_);
  m->exposer_->RegisterCollectable(m->groups_);
  return m;
}

Metrics::~Metrics() = default;

std::shared_ptr<CallObserver> Metrics::ObserverFor(const Endpoint& endpoint) const {
  return std::make_shared<EndpointMetrics>(families_, endpoint);
}

void Metrics::Track(const std::shared_ptr<GroupRuntime>& runtime) { groups_->Track(runtime); }

void Metrics::TrackAudit(std::shared_ptr<const AuditLog> audit) {
  audit_ = std::make_shared<AuditCollector>(std::move(audit));
  exposer_->RegisterCollectable(audit_);
}
void Metrics::Retire(const GroupRuntime& runtime) { groups_->Retire(runtime); }

void Metrics::CountReload(const std::string& result) { families_->reloads->Add({{"result", result}}).Increment(); }

int Metrics::port() const {
  auto ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

}  // namespace csi_proxy::host

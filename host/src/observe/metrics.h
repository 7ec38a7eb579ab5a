// Prometheus metrics on a TCP listener ([host] metrics_address): the gRPC server series upstream's middleware
// exports (grpc_server_*, same names and labels) and the host's own (csi_proxy_*). Calls are recorded by a call
// observer per endpoint whose series are resolved when the endpoint is bound, so a call costs a few atomic adds;
// the groups' state is read only when Prometheus scrapes. docs/operations.md lists every series.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "abi/endpoint_registry.h"
#include "csi_proxy/status.hpp"
#include "observe/audit_log.h"
#include "serving/group_runtime.h"
#include "serving/router.h"

namespace prometheus {
class Exposer;
class Registry;
}  // namespace prometheus

namespace csi_proxy::host {

class AuditCollector;
class GroupCollector;
struct MetricFamilies;

class Metrics {
 public:
  // The web server's bounds: scrapes served at once, and how long one connection may take to send its request
  // and be answered (an idle connection is closed then).
  static constexpr int kWorkers = 4;
  static constexpr std::chrono::milliseconds kRequestTimeout{2000};

  // Serves GET /metrics on `address` (IP:PORT; port 0 picks a free one).
  static StatusOr<std::unique_ptr<Metrics>> Start(const std::string& address);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // The observer that records the calls of `endpoint` (one per binding).
  std::shared_ptr<CallObserver> ObserverFor(const Endpoint& endpoint) const;

  // A loaded group instance, reported until it is retired (or gone).
  void Track(const std::shared_ptr<GroupRuntime>& runtime);
  // A stopped instance: its refusals stay counted in its group's total.
  void Retire(const GroupRuntime& runtime);

  // The audit log's counters (lines written, lost, cut, refusal lines not written, calls refused) and its queue.
  void TrackAudit(std::shared_ptr<const AuditLog> audit);

  // A reload's outcome: "ok", "partial" (some changes refused) or "refused" (nothing applied).
  void CountReload(const std::string& result);

  // The port the listener is bound to.
  int port() const;

 private:
  Metrics() = default;

  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<MetricFamilies> families_;
  std::shared_ptr<GroupCollector> groups_;
  std::shared_ptr<AuditCollector> audit_;
  std::unique_ptr<prometheus::Exposer> exposer_;
};

}  // namespace csi_proxy::host

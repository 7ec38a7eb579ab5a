// The standard gRPC health service (grpc.health.v1.Health: Check and Watch) of one endpoint, the host's own rather
// than gRPC's default one, so that its streams pass the endpoint's gate like every other (the stream budget, a
// bound on watches in all, the request timeout) and its callers the group's lists: a caller that may call no
// method of the group learns nothing of its health either. What it answers is what the endpoint server says (Set):
// "" and each service of the binding, SERVING or NOT_SERVING; a service a reload took away stays known, as
// NOT_SERVING.
#pragma once

#include <grpcpp/impl/service_type.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "serving/router.h"
#include "serving/stream_gate.h"

namespace csi_proxy::host {

class HealthService {
 public:
  // `binding` returns what the endpoint is bound to now (for its authorization); `gate` outlives the service.
  HealthService(StreamGate* gate, std::function<std::shared_ptr<const EndpointBinding>()> binding);
  ~HealthService();
  HealthService(const HealthService&) = delete;
  HealthService& operator=(const HealthService&) = delete;

  // The gRPC service to register on the endpoint's server.
  grpc::Service* service();

  // What each service answers from now on (true: SERVING); watchers hear of the services whose answer changed.
  void Set(const std::map<std::string, bool>& serving);
  // Ends every watch (the endpoint is stopping); a watch started later is refused by the gate.
  void EndWatches();

  // HealthCheckResponse.ServingStatus, as the service answers it.
  enum Answer : int { kServing = 1, kNotServing = 2, kServiceUnknown = 3 };
  // What a Check of `service` answers now; kServiceUnknown when it is not known.
  Answer StatusOf(const std::string& service) const;

  class Watch;  // one Watch stream

 private:
  friend class Watch;
  class Methods;
  // What `service` answers now; kServiceUnknown when it is not known. Caller holds mu_.
  Answer AnswerFor(const std::string& service) const;
  void Add(Watch* watch);
  void Remove(Watch* watch);

  StreamGate* gate_;
  std::function<std::shared_ptr<const EndpointBinding>()> binding_;
  std::unique_ptr<Methods> methods_;
  mutable std::mutex mu_;
  std::map<std::string, bool> serving_;  // guarded by mu_
  std::set<Watch*> watches_;             // guarded by mu_
  bool ended_ = false;                   // guarded by mu_
};

}  // namespace csi_proxy::host

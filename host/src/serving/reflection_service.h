// gRPC server reflection (grpc.reflection.v1alpha and grpc.reflection.v1) for one endpoint, answered from the
// descriptors its library handed over (Endpoint::file_descriptors), never from the host's own descriptor pool:
// a generic client (grpcurl, Postman, grpcio's reflection client) lists and describes exactly what the endpoint
// serves. The host's own services beside it (health, reflection) are listed and described too. A library that
// gave no descriptors (ABI version 1) has its services listed but not described. Its streams pass the endpoint's
// gate and the group's lists as health's do (health_service.h); each request must arrive within the request
// timeout of the stream's start or of the previous answer.
#pragma once

#include <functional>
#include <memory>
#include <mutex>

#include "serving/router.h"
#include "serving/stream_gate.h"

namespace grpc {
class Service;
}

namespace csi_proxy::host {

class ReflectionService {
 public:
  // `binding` returns what the endpoint is bound to now; a reload's new binding is described from then on. `gate`
  // outlives the service.
  ReflectionService(StreamGate* gate, std::function<std::shared_ptr<const EndpointBinding>()> binding);
  ~ReflectionService();
  ReflectionService(const ReflectionService&) = delete;
  ReflectionService& operator=(const ReflectionService&) = delete;

  // The two gRPC services to register on the endpoint's server.
  grpc::Service* v1alpha();
  grpc::Service* v1();

  // The descriptors of the current binding's endpoint, built once per binding.
  struct Index;
  std::shared_ptr<const Index> Current();

  StreamGate& gate() { return *gate_; }
  std::shared_ptr<const EndpointBinding> binding() const { return binding_(); }

 private:
  StreamGate* gate_;
  std::function<std::shared_ptr<const EndpointBinding>()> binding_;
  std::mutex mu_;
  std::shared_ptr<const Index> index_;  // guarded by mu_
  struct Services;
  std::unique_ptr<Services> services_;
};

}  // namespace csi_proxy::host

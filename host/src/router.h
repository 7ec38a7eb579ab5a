// The byte-level router of one endpoint: a generic gRPC service that reads a call's request, finds the method's
// handler by its path, hands the call to a dispatcher and writes whatever answers it. It does I/O only; where and
// when a handler runs is the dispatcher's business.
#pragma once

#include <grpcpp/generic/async_generic_service.h>

#include "call_handle.h"
#include "csi_proxy/status.hpp"
#include "endpoint_registry.h"

namespace csi_proxy::host {

class PeerTable;

// Runs a call's handler. An error status (RESOURCE_EXHAUSTED, UNAVAILABLE) means the call could not start; the
// router then answers it with that status.
class CallDispatcher {
 public:
  virtual ~CallDispatcher() = default;
  virtual Status Dispatch(const MethodHandler& handler, CallHandle call) = 0;
};

class Router final : public grpc::CallbackGenericService {
 public:
  // Everything passed in must outlive the gRPC server this service is registered with.
  Router(const Endpoint* endpoint, CallDispatcher* dispatcher, const PeerTable* peers)
      : endpoint_(endpoint), dispatcher_(dispatcher), peers_(peers) {}

  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override;

 private:
  const Endpoint* endpoint_;
  CallDispatcher* dispatcher_;
  const PeerTable* peers_;
};

}  // namespace csi_proxy::host

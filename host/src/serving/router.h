// The byte-level router of one endpoint: gRPC services that take a call from its first HEADERS frame, find the
// method's handler by its path, check the caller, read the request, hand the call to a dispatcher and write
// whatever answers it. It does I/O only; where and when a handler runs is the dispatcher's business.
#pragma once

#include <grpcpp/generic/async_generic_service.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "abi/call_handle.h"
#include "abi/endpoint_registry.h"
#include "csi_proxy/status.hpp"
#include "serving/authorization.h"

namespace csi_proxy::host {

class StreamGate;

// Runs a call's handler. An error status (RESOURCE_EXHAUSTED, UNAVAILABLE) means the call could not start; the
// router then answers it with that status.
class CallDispatcher {
 public:
  virtual ~CallDispatcher() = default;
  virtual Status Dispatch(const MethodHandler& handler, CallHandle call) = 0;
  // Whether calls can run at all now: false for an isolated group whose runner failed for good (the endpoints'
  // health then says NOT_SERVING).
  virtual bool Available() const { return true; }
  // Calls `changed` (keyed by `key`) when Available changes, on any thread; RemoveWatcher returns once no call to
  // it runs any more.
  virtual void AddWatcher(const void* key, std::function<void()> changed) {
    (void)key;
    (void)changed;
  }
  virtual void RemoveWatcher(const void* key) { (void)key; }
};

// A call the router has answered, as observers see it.
struct CallEvent {
  const Endpoint& endpoint;
  std::string_view method;       // the full method path, /<service>/<method>
  const MethodHandler* handler;  // null when the endpoint has no such method
  const PeerCredentials& peer;
  std::string_view request;    // the request bytes; empty when the call was refused before they were read
  csi_proxy_status_code code;  // the answer's status
  std::string_view message;    // its status message (empty on success)
  std::chrono::steady_clock::duration elapsed;  // from the request read to the answer
};

// Sees every call an endpoint reads: metrics and the audit log. Called on gRPC's threads or the thread that
// answers the call; must be thread-safe and must not block.
class CallObserver {
 public:
  virtual ~CallObserver() = default;
  // A call arrived (its HEADERS frame) and the method was looked up (handler null when unknown).
  virtual void OnStarted(const Endpoint& endpoint, std::string_view method, const MethodHandler* handler) = 0;
  // The host admitted the call (a known method, an allowed caller, a request within bounds) and is about to hand
  // it to its group: a reason to refuse it instead (answered UNAVAILABLE: nothing ran, a retry may pass), or
  // nullopt. The audit log's Overflow::kRefuse refuses a mutating call whose line it could not keep.
  virtual std::optional<std::string> Refuses(const Endpoint& endpoint, const MethodHandler& handler) {
    (void)endpoint;
    (void)handler;
    return std::nullopt;
  }
  // The call was answered; exactly once per OnStarted.
  virtual void OnFinished(const CallEvent& event) = 0;
};

// What serves an endpoint now: its methods and the dispatcher (the group instance) that owns them. A reload that
// upgrades the group binds the endpoint to the new instance; calls already read keep the binding they started with,
// except that one the old instance refuses because it is already draining goes to the new one.
struct EndpointBinding {
  const Endpoint* endpoint = nullptr;  // owned by `dispatcher`
  std::shared_ptr<CallDispatcher> dispatcher;
  size_t max_request_bytes = 0;                          // larger requests are refused before they are dispatched
  std::vector<std::shared_ptr<CallObserver>> observers;  // told of every call, in this order
  std::shared_ptr<const Authorization> authorization;    // who may call; null: whoever the socket admits
};

// Carries an endpoint's calls to its binding. Two gRPC services feed it:
// - registered methods: every method path the binding has when the server is built, each registered as a stream
//   of raw bytes, so that gRPC hands the call over at its HEADERS frame rather than holding it, out of the host's
//   sight, until a request arrives;
// - a generic service for every other path: methods a reload added after the server was built, and unknown ones
//   (answered UNIMPLEMENTED).
// Both look the method up in the binding of the moment, so a reload that removes a method unimplements it on both.
// A call is taken in at its HEADERS frame: it passes the endpoint's gate (the stream budget), the method lookup
// and the caller's check before its request is read; its request must then arrive whole within the request
// timeout, and a call whose request did not arrive whole, or whose client went away first, never reaches a handler.
class Router final {
 public:
  // `gate` must outlive the gRPC server these services are registered with.
  Router(std::shared_ptr<const EndpointBinding> binding, StreamGate* gate);
  ~Router();
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  void Bind(std::shared_ptr<const EndpointBinding> binding) { binding_.store(std::move(binding)); }
  std::shared_ptr<const EndpointBinding> binding() const { return binding_.load(); }

  // The registered methods of the binding given to the constructor (paths below /grpc. are left to gRPC's own
  // services), and the generic service. Register both with the endpoint's server.
  grpc::Service* methods();
  grpc::CallbackGenericService* generic();

  StreamGate& gate() const { return *gate_; }

 private:
  class Methods;
  class Generic;

  std::atomic<std::shared_ptr<const EndpointBinding>> binding_;
  StreamGate* gate_;
  std::unique_ptr<Methods> methods_;
  std::unique_ptr<Generic> generic_;
};

}  // namespace csi_proxy::host

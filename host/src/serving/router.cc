// See router.h.
#include "serving/router.h"

#include <grpcpp/impl/codegen/server_callback_handlers.h>
#include <grpcpp/impl/rpc_service_method.h>
#include <grpcpp/impl/service_type.h>
#include <grpcpp/version_info.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <mutex>
#include <optional>

#include "serving/peer_table.h"

// The registered methods below stand on gRPC's internal API as the code gRPC generates for raw callback methods
// uses it (grpc::internal::RpcServiceMethod, grpc::internal::CallbackUnaryHandler, Service::MarkMethodRawCallback).
// It is not a stable API, so it is pinned to the gRPC it was written and measured against: another gRPC fails the
// build here until the methods are checked against its generated code and RouterTest.TheRegisteredMethodsServe-
// OnTheirOwn (tests/host/serving/router_test.cc) passes with it.
static_assert(GRPC_CPP_VERSION_MAJOR == 1 && GRPC_CPP_VERSION_MINOR == 51,
              "router.cc uses grpc::internal as gRPC 1.51's generated code does: check it against this gRPC");

namespace csi_proxy::host {
namespace {

// A status message fits in the metadata limit of every gRPC client (8 KiB by default), whatever a handler wrote.
constexpr size_t kMaxStatusMessage = 4096;

std::string_view BoundedMessage(std::string_view message) { return message.substr(0, kMaxStatusMessage); }

grpc::Status ToGrpc(csi_proxy_status_code code, std::string_view message) {
  return grpc::Status(static_cast<grpc::StatusCode>(code), std::string(message));
}

// What the host answers itself when it refuses a call before its handler.
struct EarlyAnswer {
  csi_proxy_status_code code;
  std::string message;
};

// One call, whichever service carried it: admits it, dispatches it and answers it once (the handler's answer, or
// the host's when the call is cancelled, past its deadline or cannot start). The frontends below read the request
// and write the answer the way their gRPC API wants.
class Call : public CallAnswerSink {
 protected:
  Call(grpc::ServerContextBase* ctx, const std::string& method, const Router* router)
      : ctx_(ctx), method_(method), router_(router) {}

  // The request has been read: look the method up, tell the observers, check the call and hand it over.
  void Begin(const grpc::ByteBuffer& request) {
    started_ = std::chrono::steady_clock::now();
    binding_ = router_->binding();
    peer_ = router_->peers().Get(ctx_->peer());
    const Endpoint& endpoint = *binding_->endpoint;
    auto it = endpoint.methods.find(method_);
    handler_ = it == endpoint.methods.end() ? nullptr : &it->second;
    for (const auto& o : binding_->observers) o->OnStarted(endpoint, method_, handler_);
    if (std::optional<EarlyAnswer> refused = Admit(endpoint, request)) {
      return Answer(refused->code, refused->message, {});
    }
    Dispatch(endpoint, request);
  }

  // The client cancelled, the deadline passed, or the server is shutting down: answer now, whatever the handler
  // is doing.
  void Cancelled() {
    CallHandle call;
    {
      std::lock_guard lock(mu_);
      cancelled_ = true;
      call = call_;
    }
    if (call) call->Abandon(CancelCode(), CancelMessage());
  }

  // gRPC is done with the call: nothing may be answered through this object any more.
  void Done() {
    if (call_) call_->DetachSink();
  }

  // Writes the answer to the client; called once.
  virtual void Send(csi_proxy_status_code code, std::string_view message, std::string_view response) = 0;

 public:
  // CallAnswerSink: called once, by whoever answers first.
  void Answer(csi_proxy_status_code code, std::string_view message, std::string_view response) override {
    if (finished_.exchange(true)) return;
    if (binding_ && !binding_->observers.empty()) {
      const csi_proxy_host_call* call = answered_call_.load(std::memory_order_acquire);
      const CallEvent event{*binding_->endpoint,
                            method_,
                            handler_,
                            peer_,
                            call != nullptr ? std::string_view(call->request()) : std::string_view(),
                            code,
                            code == CSI_PROXY_STATUS_OK ? std::string_view() : message,
                            std::chrono::steady_clock::now() - started_};
      for (const auto& o : binding_->observers) o->OnFinished(event);
    }
    Send(code, code == CSI_PROXY_STATUS_OK ? std::string_view() : BoundedMessage(message), response);
  }

 private:
  // The host's checks of a call, after the method lookup and before the library sees it: the answer that refuses
  // the call, or nullopt when it may run. Every check that answers without the library belongs here.
  std::optional<EarlyAnswer> Admit(const Endpoint& endpoint, const grpc::ByteBuffer& request) const {
    if (handler_ == nullptr) {
      return EarlyAnswer{CSI_PROXY_STATUS_UNIMPLEMENTED, "unknown method " + method_ + " on endpoint " + endpoint.name};
    }
    if (binding_->authorization) {
      if (auto refused = binding_->authorization->Check(peer_, method_, *handler_)) {
        LogRefusal(peer_, *refused);
        return EarlyAnswer{CSI_PROXY_STATUS_PERMISSION_DENIED, *refused};
      }
    }
    if (size_t size = request.Length(); size > binding_->max_request_bytes) {
      return EarlyAnswer{CSI_PROXY_STATUS_RESOURCE_EXHAUSTED,
                         "the request is " + std::to_string(size) + " bytes; group '" + endpoint.group +
                             "' accepts at most " + std::to_string(binding_->max_request_bytes)};
    }
    for (const auto& o : binding_->observers) {
      if (auto refused = o->Refuses(endpoint, *handler_)) return EarlyAnswer{CSI_PROXY_STATUS_UNAVAILABLE, *refused};
    }
    return std::nullopt;
  }

  // Hands the admitted call to the group instance, which runs its handler inline or on one of its workers. The
  // request goes as one slice: gRPC's own when the message arrived in one piece (the usual case for a small
  // message), so that it is shared with the call rather than copied.
  void Dispatch(const Endpoint& endpoint, const grpc::ByteBuffer& request) {
    grpc::Slice slice;
    if (!request.DumpToSingleSlice(&slice).ok()) slice = grpc::Slice();
    CallInfo info{endpoint.group, method_, peer_, ctx_->deadline()};
    auto call = std::make_shared<csi_proxy_host_call>(std::move(info), std::move(slice), this);
    answered_call_.store(call.get(), std::memory_order_release);
    {
      std::lock_guard lock(mu_);
      if (cancelled_) return call->Abandon(CancelCode(), CancelMessage());
      call_ = call;
    }
    Status started = binding_->dispatcher->Dispatch(*handler_, call);
    // A reload replaced the group's instance between the lookup and the hand-over, and the old one, draining,
    // takes no new call: the instance that serves now takes it, when it has the method (reloads back to back may
    // have replaced that one too). The observers keep the binding the call started with.
    const EndpointBinding* tried = binding_.get();
    for (int redirects = 0; started.code() == Code::kUnavailable && redirects < 8; ++redirects) {
      std::shared_ptr<const EndpointBinding> now = router_->binding();
      auto it = now->endpoint->methods.find(method_);
      if (now.get() == tried || it == now->endpoint->methods.end()) break;
      tried = now.get();
      redirected_ = std::move(now);
      started = redirected_->dispatcher->Dispatch(it->second, call);
    }
    if (!started.ok()) call->Abandon(static_cast<csi_proxy_status_code>(started.code()), started.message());
  }

  bool PastDeadline() const { return std::chrono::system_clock::now() >= ctx_->deadline(); }
  csi_proxy_status_code CancelCode() const {
    return PastDeadline() ? static_cast<csi_proxy_status_code>(Code::kDeadlineExceeded)
                          : static_cast<csi_proxy_status_code>(Code::kCancelled);
  }
  std::string CancelMessage() const {
    return (PastDeadline() ? "the deadline passed while " : "the call was cancelled while ") + method_ +
           " was in progress";
  }

  grpc::ServerContextBase* ctx_;
  const std::string& method_;  // the full method path; owned by the context or the registered method
  const Router* router_;
  // Set in Begin, before anything can answer the call except a failed read.
  std::shared_ptr<const EndpointBinding> binding_;
  const MethodHandler* handler_ = nullptr;             // owned by binding_'s endpoint; null when the method is unknown
  std::shared_ptr<const EndpointBinding> redirected_;  // the newer binding that took the call, if one did
  PeerCredentials peer_;                               // the connection's, from SO_PEERCRED and SO_PEERGROUPS
  std::chrono::steady_clock::time_point started_;
  std::atomic<const csi_proxy_host_call*> answered_call_{nullptr};  // kept alive by call_ (or the caller of Answer)
  std::atomic<bool> finished_{false};
  std::mutex mu_;
  bool cancelled_ = false;  // guarded by mu_
  CallHandle call_;         // guarded by mu_; set once
};

grpc::ByteBuffer ResponseBytes(std::string_view response) {
  grpc::Slice slice(response.data(), response.size());
  return grpc::ByteBuffer(&slice, 1);
}

// A call of a registered method: gRPC has read the request with the call, and the answer finishes it.
class UnaryCall final : public grpc::ServerUnaryReactor, public Call {
 public:
  UnaryCall(grpc::CallbackServerContext* ctx, const std::string& method, const Router* router,
            grpc::ByteBuffer* response)
      : Call(ctx, method, router), response_(response) {}

  using Call::Begin;
  void OnCancel() override { Cancelled(); }
  void OnDone() override {
    Done();
    delete this;
  }
  // OnDone and OnCancel never block (they take this call's own mutex at most), so gRPC may run them on the thread
  // that finished the call rather than hand them to its executor thread, as it does for a generated method's
  // default reactor.
  bool InternalInlineable() override { return true; }

 private:
  void Send(csi_proxy_status_code code, std::string_view message, std::string_view response) override {
    if (code == CSI_PROXY_STATUS_OK) {
      *response_ = ResponseBytes(response);
      return Finish(grpc::Status::OK);
    }
    Finish(ToGrpc(code, message));
  }

  grpc::ByteBuffer* response_;  // owned by gRPC until the call is done
};

// A call that came through the generic service: one bidi stream that carries one request and one answer.
class StreamCall final : public grpc::ServerGenericBidiReactor, public Call {
 public:
  StreamCall(grpc::GenericCallbackServerContext* ctx, const Router* router) : Call(ctx, ctx->method(), router) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) return Answer(CSI_PROXY_STATUS_INVALID_ARGUMENT, "the call carried no request message", {});
    Begin(request_);
    request_.Clear();
  }
  void OnCancel() override { Cancelled(); }
  void OnDone() override {
    Done();
    delete this;
  }

 private:
  void Send(csi_proxy_status_code code, std::string_view message, std::string_view response) override {
    if (code == CSI_PROXY_STATUS_OK) {
      response_ = ResponseBytes(response);
      return StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
    }
    Finish(ToGrpc(code, message));
  }

  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
};

}  // namespace

class Router::Methods final : public grpc::Service {
 public:
  Methods(const Endpoint& endpoint, const Router* router) {
    for (const auto& [path, handler] : endpoint.methods) {
      if (path.starts_with("/grpc.")) continue;  // gRPC's health and reflection services have those
      const std::string& method = *paths_.emplace_back(std::make_unique<std::string>(path));
      AddMethod(new grpc::internal::RpcServiceMethod(method.c_str(), grpc::internal::RpcMethod::NORMAL_RPC, nullptr));
      MarkMethodRawCallback(static_cast<int>(paths_.size() - 1),
                            new grpc::internal::CallbackUnaryHandler<grpc::ByteBuffer, grpc::ByteBuffer>(
                                [&method, router](grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                                  grpc::ByteBuffer* response) {
                                  auto* call = new UnaryCall(ctx, method, router, response);
                                  call->Begin(*request);
                                  return call;
                                }));
    }
  }

 private:
  std::vector<std::unique_ptr<std::string>> paths_;  // the registered paths, whose addresses gRPC keeps
};

class Router::Generic final : public grpc::CallbackGenericService {
 public:
  explicit Generic(const Router* router) : router_(router) {}
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    return new StreamCall(ctx, router_);
  }

 private:
  const Router* router_;
};

Router::Router(std::shared_ptr<const EndpointBinding> binding, const PeerTable* peers)
    : binding_(binding),
      peers_(peers),
      methods_(std::make_unique<Methods>(*binding->endpoint, this)),
      generic_(std::make_unique<Generic>(this)) {}

Router::~Router() = default;

grpc::Service* Router::methods() { return methods_.get(); }
grpc::CallbackGenericService* Router::generic() { return generic_.get(); }

}  // namespace csi_proxy::host

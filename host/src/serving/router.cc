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

#include "serving/inline_read_handler.h"
#include "serving/stream_gate.h"

// The registered methods below stand on gRPC's internal API as the code gRPC generates for raw callback methods
// uses it (grpc::internal::RpcServiceMethod, Service::MarkMethodRawCallback), with the handler of
// inline_read_handler.h.
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

grpc::ByteBuffer ResponseBytes(std::string_view response) {
  grpc::Slice slice(response.data(), response.size());
  return grpc::ByteBuffer(&slice, 1);
}

// What the host answers itself when it refuses a call before its handler.
struct EarlyAnswer {
  csi_proxy_status_code code;
  std::string message;
};

// One call, whichever service carried it: one gRPC stream that carries one request and one answer. It is taken
// in at its HEADERS frame (admitted or answered at once), reads its request, dispatches it and answers once: the
// handler's answer, or the host's when the call is refused, cancelled, past its deadline, its request never came
// whole, or it cannot start. `Request` is RequestBytes for a registered method (inline_read_handler.h), and
// grpc::ByteBuffer for one of the generic service.
template <typename Request>
class Call final : public grpc::ServerBidiReactor<Request, grpc::ByteBuffer>,
                   public CallAnswerSink,
                   private AwaitingRequest {
 public:
  Call(grpc::CallbackServerContext* ctx, const std::string& method, const Router* router)
      : ctx_(ctx), method_(method), router_(router), conn_(router->gate().ConnectionOf(*ctx)) {
    binding_ = router_->binding();
    const Endpoint& endpoint = *binding_->endpoint;
    auto it = endpoint.methods.find(method_);
    handler_ = it == endpoint.methods.end() ? nullptr : &it->second;
    for (const auto& o : binding_->observers) o->OnStarted(endpoint, method_, handler_);
    if (std::optional<EarlyAnswer> refused = Admit(endpoint)) {
      Answer(refused->code, refused->message, {});
      return;
    }
    router_->gate().accounts().Await(*this);
    this->StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    // At its request timeout the reaper took the call and answers it: nothing more to do here.
    if (!router_->gate().accounts().Arrived(*this)) return;
    if (!ok) {
      // The stream ended (HEADERS with END_STREAM and no message, a hang-up, a reset) before a whole message.
      return Answer(CSI_PROXY_STATUS_INVALID_ARGUMENT, "the call carried no request message", {});
    }
    if (ctx_->IsCancelled()) {
      return Answer(CancelCode(), "the call was cancelled before " + method_ + " started", {});
    }
    router_->gate().CallStarted();
    in_flight_ = true;
    Begin();
    request_ = Request();
  }

  void OnCancel() override {
    CallHandle call;
    {
      std::lock_guard lock(mu_);
      cancelled_ = true;
      call = call_;
    }
    // A call still waiting for its request is answered when its read ends, which the cancellation makes happen.
    if (call) call->Abandon(CancelCode(), CancelMessage());
  }

  void OnDone() override {
    if (call_) call_->DetachSink();
    // Counted until here, where the answer has been written: a stop that closes the connections once no call is in
    // flight must not cut an answer off on its way.
    if (in_flight_) router_->gate().CallAnswered();
    delete this;
  }
  // OnDone never blocks (it takes this call's own mutex at most), so gRPC may run it on the thread that finished
  // the call rather than hand it to its executor thread.
  bool InternalInlineable() override { return true; }

  // CallAnswerSink: called once, by whoever answers first.
  void Answer(csi_proxy_status_code code, std::string_view message, std::string_view response) override {
    if (finished_.exchange(true)) return;
    if (!binding_->observers.empty()) {
      const csi_proxy_host_call* call = answered_call_.load(std::memory_order_acquire);
      const CallEvent event{*binding_->endpoint,
                            method_,
                            handler_,
                            conn_->creds,
                            call != nullptr ? std::string_view(call->request()) : std::string_view(),
                            code,
                            code == CSI_PROXY_STATUS_OK ? std::string_view() : message,
                            std::chrono::steady_clock::now() - started_};
      for (const auto& o : binding_->observers) o->OnFinished(event);
    }
    // Given back before the answer goes out: a client that opens its next stream on seeing it finds the place.
    ticket_.Release();
    if (code == CSI_PROXY_STATUS_OK) {
      response_ = ResponseBytes(response);
      return this->StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
    }
    this->Finish(ToGrpc(code, BoundedMessage(message)));
  }

 private:
  // AwaitingRequest: the request did not arrive within the timeout.
  void RequestTimedOut() override {
    auto timeout = router_->gate().accounts().limits().request_timeout;
    Answer(CSI_PROXY_STATUS_DEADLINE_EXCEEDED,
           "the request of " + method_ + " did not arrive within " + std::to_string(timeout.count()) +
               " ms of the call's start",
           {});
  }

  // The host's checks of a call at its HEADERS frame, before its request is read: the answer that refuses the
  // call, or nullopt when it may go on. Every check that answers without the library belongs here or in Begin.
  std::optional<EarlyAnswer> Admit(const Endpoint& endpoint) {
    if (auto refused = router_->gate().Open(*conn_, StreamAccounts::Kind::kCall, ticket_)) {
      return EarlyAnswer{static_cast<csi_proxy_status_code>(refused->code), std::move(refused->message)};
    }
    if (handler_ == nullptr) {
      return EarlyAnswer{CSI_PROXY_STATUS_UNIMPLEMENTED, "unknown method " + method_ + " on endpoint " + endpoint.name};
    }
    if (binding_->authorization) {
      if (auto refused = binding_->authorization->Check(conn_->creds, method_, *handler_)) {
        LogRefusal(conn_->creds, *refused);
        return EarlyAnswer{CSI_PROXY_STATUS_PERMISSION_DENIED, *refused};
      }
    }
    return std::nullopt;
  }

  // The request has been read whole: check its size, ask the observers (a strict audit log refuses a call whose
  // line it could not keep) and hand it over.
  void Begin() {
    started_ = std::chrono::steady_clock::now();
    const Endpoint& endpoint = *binding_->endpoint;
    if (size_t size = BytesOf(request_).Length(); size > binding_->max_request_bytes) {
      return Answer(CSI_PROXY_STATUS_RESOURCE_EXHAUSTED,
                    "the request is " + std::to_string(size) + " bytes; group '" + endpoint.group +
                        "' accepts at most " + std::to_string(binding_->max_request_bytes),
                    {});
    }
    for (const auto& o : binding_->observers) {
      if (auto refused = o->Refuses(endpoint, *handler_)) return Answer(CSI_PROXY_STATUS_UNAVAILABLE, *refused, {});
    }
    Dispatch(endpoint);
  }

  // Hands the admitted call to the group instance, which runs its handler inline or on one of its workers. The
  // request goes as one slice: gRPC's own when the message arrived in one piece (the usual case for a small
  // message), so that it is shared with the call rather than copied.
  void Dispatch(const Endpoint& endpoint) {
    grpc::Slice slice;
    if (!BytesOf(request_).DumpToSingleSlice(&slice).ok()) slice = grpc::Slice();
    CallInfo info{endpoint.group, method_, conn_->creds, ctx_->deadline()};
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

  grpc::CallbackServerContext* ctx_;
  const std::string& method_;  // the full method path; owned by the context or the registered method
  const Router* router_;
  const std::shared_ptr<PeerConnection> conn_;         // who connected (SO_PEERCRED and SO_PEERGROUPS on Linux)
  std::shared_ptr<const EndpointBinding> binding_;     // the binding of the call's HEADERS
  const MethodHandler* handler_ = nullptr;             // owned by binding_'s endpoint; null when the method is unknown
  std::shared_ptr<const EndpointBinding> redirected_;  // the newer binding that took the call, if one did
  StreamAccounts::Ticket ticket_;                      // the call's place in the stream budget
  bool in_flight_ = false;                             // counted by the gate as a call in flight
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  Request request_;
  grpc::ByteBuffer response_;
  std::atomic<const csi_proxy_host_call*> answered_call_{nullptr};  // kept alive by call_ (or the caller of Answer)
  std::atomic<bool> finished_{false};
  std::mutex mu_;
  bool cancelled_ = false;  // guarded by mu_
  CallHandle call_;         // guarded by mu_; set once
};

}  // namespace

class Router::Methods final : public grpc::Service {
 public:
  Methods(const Endpoint& endpoint, const Router* router) {
    for (const auto& [path, handler] : endpoint.methods) {
      if (path.starts_with("/grpc.")) continue;  // the host's health and reflection services have those
      const std::string& method = *paths_.emplace_back(std::make_unique<std::string>(path));
      // A bidirectional stream for gRPC (a unary call on the wire): gRPC hands it over at once instead of
      // reading the request first, and the call reads it itself.
      AddMethod(
          new grpc::internal::RpcServiceMethod(method.c_str(), grpc::internal::RpcMethod::BIDI_STREAMING, nullptr));
      MarkMethodRawCallback(static_cast<int>(paths_.size() - 1),
                            new InlineReadHandler([&method, router](grpc::CallbackServerContext* ctx) {
                              return new Call<RequestBytes>(ctx, method, router);
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
    return new Call<grpc::ByteBuffer>(ctx, ctx->method(), router_);
  }

 private:
  const Router* router_;
};

Router::Router(std::shared_ptr<const EndpointBinding> binding, StreamGate* gate)
    : binding_(binding),
      gate_(gate),
      methods_(std::make_unique<Methods>(*binding->endpoint, this)),
      generic_(std::make_unique<Generic>(this)) {}

Router::~Router() = default;

grpc::Service* Router::methods() { return methods_.get(); }
grpc::CallbackGenericService* Router::generic() { return generic_.get(); }

}  // namespace csi_proxy::host

// See router.h.
#include "router.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <mutex>
#include <optional>

#include "listeners.h"

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

// One unary call: read the request, dispatch it, write the one answer (the handler's, or the host's when the call
// is cancelled, past its deadline or cannot start). Deletes itself when gRPC is done with the call.
class CallReactor final : public grpc::ServerGenericBidiReactor, public CallAnswerSink {
 public:
  CallReactor(grpc::GenericCallbackServerContext* ctx, const Router* router, const PeerTable* peers)
      : ctx_(ctx), router_(router), peers_(peers) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) return Answer(CSI_PROXY_STATUS_INVALID_ARGUMENT, "the call carried no request message", {});
    started_ = std::chrono::steady_clock::now();
    binding_ = router_->binding();
    peer_ = peers_->Get(ctx_->peer());
    const Endpoint& endpoint = *binding_->endpoint;
    auto it = endpoint.methods.find(ctx_->method());
    handler_ = it == endpoint.methods.end() ? nullptr : &it->second;
    for (const auto& o : binding_->observers) o->OnStarted(endpoint, ctx_->method(), handler_);
    if (std::optional<EarlyAnswer> refused = Admit(endpoint)) {
      return Answer(refused->code, refused->message, {});
    }
    Dispatch(endpoint);
  }

  // The host's checks of a call, after the method lookup and before the library sees it: the answer that refuses
  // the call, or nullopt when it may run. Every check that answers without the library belongs here.
  std::optional<EarlyAnswer> Admit(const Endpoint& endpoint) const {
    if (handler_ == nullptr) {
      return EarlyAnswer{CSI_PROXY_STATUS_UNIMPLEMENTED,
                         "unknown method " + ctx_->method() + " on endpoint " + endpoint.name};
    }
    if (binding_->authorization) {
      if (auto refused = binding_->authorization->Check(peer_, ctx_->method(), *handler_)) {
        LogRefusal(peer_, *refused);
        return EarlyAnswer{CSI_PROXY_STATUS_PERMISSION_DENIED, *refused};
      }
    }
    if (size_t size = request_.Length(); size > binding_->max_request_bytes) {
      return EarlyAnswer{CSI_PROXY_STATUS_RESOURCE_EXHAUSTED,
                         "the request is " + std::to_string(size) + " bytes; group '" + endpoint.group +
                             "' accepts at most " + std::to_string(binding_->max_request_bytes)};
    }
    return std::nullopt;
  }

  // Hands the admitted call to the group instance, which runs its handler inline or on one of its workers.
  void Dispatch(const Endpoint& endpoint) {
    CallInfo info{endpoint.group, ctx_->method(), peer_, ctx_->deadline()};
    auto call = std::make_shared<csi_proxy_host_call>(std::move(info), TakeRequest(), this);
    answered_call_.store(call.get(), std::memory_order_release);
    {
      std::lock_guard lock(mu_);
      if (cancelled_) return call->Abandon(CancelCode(), CancelMessage());
      call_ = call;
    }
    Status started = binding_->dispatcher->Dispatch(*handler_, call);
    if (!started.ok()) call->Abandon(static_cast<csi_proxy_status_code>(started.code()), started.message());
  }

  // The client cancelled, the deadline passed, or the server is shutting down: answer now, whatever the handler
  // is doing. A call still waiting for its request is answered by OnReadDone(false).
  void OnCancel() override {
    CallHandle call;
    {
      std::lock_guard lock(mu_);
      cancelled_ = true;
      call = call_;
    }
    if (call) call->Abandon(CancelCode(), CancelMessage());
  }

  void OnDone() override {
    if (call_) call_->DetachSink();
    delete this;
  }

  // CallAnswerSink: called once, by whoever answers first.
  void Answer(csi_proxy_status_code code, std::string_view message, std::string_view response) override {
    if (finished_.exchange(true)) return;
    if (binding_ && !binding_->observers.empty()) {
      const csi_proxy_host_call* call = answered_call_.load(std::memory_order_acquire);
      const CallEvent event{*binding_->endpoint, ctx_->method(), handler_, peer_,
                            call != nullptr ? std::string_view(call->request()) : std::string_view(),
                            code, code == CSI_PROXY_STATUS_OK ? std::string_view() : message,
                            std::chrono::steady_clock::now() - started_};
      for (const auto& o : binding_->observers) o->OnFinished(event);
    }
    if (code == CSI_PROXY_STATUS_OK) {
      grpc::Slice slice(response.data(), response.size());
      response_ = grpc::ByteBuffer(&slice, 1);
      StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
    } else {
      Finish(ToGrpc(code, BoundedMessage(message)));
    }
  }

 private:
  // The request as one slice: gRPC's own when the message arrived in one piece (the usual case for a small
  // message), so that it is shared with the call rather than copied.
  grpc::Slice TakeRequest() {
    grpc::Slice slice;
    if (!request_.DumpToSingleSlice(&slice).ok()) slice = grpc::Slice();
    request_.Clear();
    return slice;
  }

  bool PastDeadline() const { return std::chrono::system_clock::now() >= ctx_->deadline(); }
  csi_proxy_status_code CancelCode() const {
    return PastDeadline() ? static_cast<csi_proxy_status_code>(Code::kDeadlineExceeded)
                          : static_cast<csi_proxy_status_code>(Code::kCancelled);
  }
  std::string CancelMessage() const {
    return (PastDeadline() ? "the deadline passed while " : "the call was cancelled while ") + ctx_->method() +
           " was in progress";
  }

  grpc::GenericCallbackServerContext* ctx_;
  const Router* router_;
  const PeerTable* peers_;
  // Set in OnReadDone, before anything can answer the call except a failed read.
  std::shared_ptr<const EndpointBinding> binding_;
  const MethodHandler* handler_ = nullptr;  // owned by binding_'s endpoint; null when the method is unknown
  PeerCredentials peer_;                    // the connection's, from SO_PEERCRED and SO_PEERGROUPS
  std::chrono::steady_clock::time_point started_;
  std::atomic<const csi_proxy_host_call*> answered_call_{nullptr};  // kept alive by call_ (or the caller of Answer)
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
  std::atomic<bool> finished_{false};
  std::mutex mu_;
  bool cancelled_ = false;  // guarded by mu_
  CallHandle call_;         // guarded by mu_; set once
};

}  // namespace

grpc::ServerGenericBidiReactor* Router::CreateReactor(grpc::GenericCallbackServerContext* ctx) {
  return new CallReactor(ctx, this, peers_);
}

}  // namespace csi_proxy::host

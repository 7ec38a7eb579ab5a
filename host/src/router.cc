// See router.h.
#include "router.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <mutex>

#include "listeners.h"

namespace csi_proxy::host {
namespace {

// A status message fits in the metadata limit of every gRPC client (8 KiB by default), whatever a handler wrote.
constexpr size_t kMaxStatusMessage = 4096;

std::string_view BoundedMessage(std::string_view message) { return message.substr(0, kMaxStatusMessage); }

grpc::Status ToGrpc(csi_proxy_status_code code, std::string_view message) {
  return grpc::Status(static_cast<grpc::StatusCode>(code), std::string(message));
}

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
    const Endpoint& endpoint = *binding_->endpoint;
    auto it = endpoint.methods.find(ctx_->method());
    handler_ = it == endpoint.methods.end() ? nullptr : &it->second;
    for (const auto& o : binding_->observers) o->OnStarted(endpoint, ctx_->method(), handler_);
    if (handler_ == nullptr) {
      return Answer(CSI_PROXY_STATUS_UNIMPLEMENTED,
                    "unknown method " + ctx_->method() + " on endpoint " + endpoint.name, {});
    }
    PeerCredentials peer = peers_->Get(ctx_->peer());
    if (binding_->authorization) {
      if (auto refused = binding_->authorization->Check(peer, ctx_->method(), *handler_)) {
        LogRefusal(peer, *refused);
        return Answer(CSI_PROXY_STATUS_PERMISSION_DENIED, *refused, {});
      }
    }
    if (size_t size = request_.Length(); size > binding_->max_request_bytes) {
      return Answer(CSI_PROXY_STATUS_RESOURCE_EXHAUSTED,
                    "the request is " + std::to_string(size) + " bytes; group '" + endpoint.group +
                        "' accepts at most " + std::to_string(binding_->max_request_bytes),
                    {});
    }
    CallInfo info{endpoint.group, ctx_->method(), std::move(peer), ctx_->deadline()};
    auto call = std::make_shared<csi_proxy_host_call>(std::move(info), RequestBytes(), this);
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
      const PeerCredentials peer = call != nullptr ? call->info().peer : peers_->Get(ctx_->peer());
      const CallEvent event{*binding_->endpoint, ctx_->method(), handler_, peer,
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
  std::string RequestBytes() {
    std::vector<grpc::Slice> slices;
    std::string bytes;
    if (request_.Dump(&slices).ok()) {
      for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
    request_.Clear();
    return bytes;
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

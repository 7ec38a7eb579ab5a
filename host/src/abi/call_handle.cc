// See call_handle.h.
#include "abi/call_handle.h"

#include <spdlog/spdlog.h>

#include "abi/line_budget.h"
#include "csi_proxy/status.hpp"

using csi_proxy::host::CallAnswerSink;
using csi_proxy::host::CallInfo;

csi_proxy_host_call::csi_proxy_host_call(CallInfo info, grpc::Slice request, CallAnswerSink* sink)
    : info_(std::move(info)), request_(std::move(request)), started_(std::chrono::steady_clock::now()), sink_(sink) {}

CallAnswerSink* csi_proxy_host_call::TakeSink() {
  std::lock_guard lock(mu_);
  return std::exchange(sink_, nullptr);
}

void csi_proxy_host_call::Complete(csi_proxy_status_code code, std::string_view message, std::string_view response) {
  if (completed_.exchange(true, std::memory_order_acq_rel)) {
    spdlog::error("[{}] {} was completed twice; the second completion is ignored", info_.group, info_.method);
    return;
  }
  // The plugin's reference goes with this completion; `keep` holds the handle until this function returns.
  std::shared_ptr<csi_proxy_host_call> keep = std::move(plugin_ref_);
  std::function<void()> on_completed = std::move(on_completed_);
  struct Notify {
    std::function<void()>& fn;
    ~Notify() {
      if (fn) fn();
    }
  } notify{on_completed};
  auto elapsed = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started_);
  // An answer that comes after the deadline is a deadline failure, whatever it says (as gRPC itself would have it
  // had its timer fired first).
  std::string late;
  if (code == CSI_PROXY_STATUS_OK && std::chrono::system_clock::now() > info_.deadline) {
    code = static_cast<csi_proxy_status_code>(csi_proxy::Code::kDeadlineExceeded);
    late = "the deadline passed before " + info_.method + " finished";
    message = late;
    response = {};
  }
  CallAnswerSink* sink = TakeSink();
  if (sink == nullptr) {
    spdlog::info("[{}] {} finished with {} after {} us, but the call had already been answered; result dropped",
                 info_.group, info_.method, csi_proxy::CodeName(code), elapsed.count());
    return;
  }
  if (sink->Relays()) {
    // Logged where it is relayed to.
  } else if (code == CSI_PROXY_STATUS_OK) {
    spdlog::debug("[{}] {} OK in {} us", info_.group, info_.method, elapsed.count());
  } else {
    // One line per caller, method and code every ten seconds, with the count of those not logged: a caller whose
    // calls keep failing cannot flood the log. The message may quote request values: a line stays short whatever
    // the request held.
    static csi_proxy::host::LineBudget budget(1, std::chrono::seconds(10));
    uint64_t not_logged = 0;
    if (budget.Allow(std::to_string(info_.peer.uid) + " " + info_.method + " " + std::to_string(code), not_logged)) {
      constexpr size_t kMaxLogged = 512;
      spdlog::info("[{}] {} failed with {} in {} us: {}{}{}", info_.group, info_.method, csi_proxy::CodeName(code),
                   elapsed.count(), message.substr(0, kMaxLogged),
                   message.size() > kMaxLogged ? " ... (" + std::to_string(message.size()) + " bytes)" : "",
                   not_logged == 0 ? ""
                                   : " (" + std::to_string(not_logged) + " more failures of this method with this " +
                                         "code for uid " + std::to_string(info_.peer.uid) + " were not logged)");
    }
  }
  sink->Answer(code, message, response);
}

CallAnswerSink* csi_proxy_host_call::Cancel() {
  // Stored before the lock: OnCancelled, which reads it under the lock, either sees it or leaves its listener here.
  cancelled_.store(true, std::memory_order_release);
  std::function<void()> listener;
  CallAnswerSink* sink;
  {
    std::lock_guard lock(mu_);
    sink = std::exchange(sink_, nullptr);
    listener = std::move(cancel_listener_);
  }
  if (listener && !completed()) listener();
  return sink;
}

void csi_proxy_host_call::OnCancelled(std::function<void()> listener) {
  {
    std::lock_guard lock(mu_);
    if (!cancelled_.load(std::memory_order_acquire)) {
      cancel_listener_ = std::move(listener);
      return;
    }
  }
  if (!completed()) listener();
}

void csi_proxy_host_call::Abandon(csi_proxy_status_code code, std::string_view message) {
  if (CallAnswerSink* sink = Cancel()) sink->Answer(code, message, {});
}

void csi_proxy_host_call::HandOverToPlugin(std::shared_ptr<csi_proxy_host_call> self,
                                           std::function<void()> on_completed) {
  plugin_ref_ = std::move(self);
  on_completed_ = std::move(on_completed);
}

void csi_proxy_host_call::DetachSink() { Cancel(); }

int64_t csi_proxy_host_call::DeadlineUnixNs() const {
  if (info_.deadline == std::chrono::system_clock::time_point::max()) return INT64_MAX;
  return std::chrono::duration_cast<std::chrono::nanoseconds>(info_.deadline.time_since_epoch()).count();
}

bool csi_proxy_host_call::IsCancelled() const {
  return cancelled_.load(std::memory_order_acquire) || std::chrono::system_clock::now() > info_.deadline;
}

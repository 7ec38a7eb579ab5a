// One call in flight as the host tracks it: the C ABI's call handle (csi_proxy_host_call). It has a lifetime of
// its own, apart from the gRPC reactor that reads the request and writes the answer, so that a call can be
// answered without its handler (at its deadline, when the client cancels, at shutdown) and a handler that completes
// later is dropped without harm.
#pragma once

#include <grpcpp/support/slice.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "abi/peer_credentials.h"
#include "csi_proxy/plugin_abi.h"

namespace csi_proxy::host {

// Where a call's answer goes (the router's reactor). Answer is called at most once per call.
class CallAnswerSink {
 public:
  virtual ~CallAnswerSink() = default;
  virtual void Answer(csi_proxy_status_code code, std::string_view message, std::string_view response) = 0;
  // Whether the answer goes on to another call handle, which logs the call's outcome: an isolated group's runner
  // answers the host's handle, and the outcome is logged there once, with the time the caller waited.
  virtual bool Relays() const { return false; }
};

struct CallInfo {
  std::string group;   // the group serving the endpoint
  std::string method;  // the full method path, /<service>/<method>
  PeerCredentials peer;
  std::chrono::system_clock::time_point deadline = std::chrono::system_clock::time_point::max();
};

}  // namespace csi_proxy::host

// Created by the router for each call it dispatches and shared by it, the executor that runs the handler and the
// plugin (which holds a raw pointer from the handler's start until complete_call returns).
struct csi_proxy_host_call {
 public:
  // `request`: the request message as gRPC read it, shared rather than copied.
  csi_proxy_host_call(csi_proxy::host::CallInfo info, grpc::Slice request, csi_proxy::host::CallAnswerSink* sink);
  csi_proxy_host_call(const csi_proxy_host_call&) = delete;
  csi_proxy_host_call& operator=(const csi_proxy_host_call&) = delete;

  const csi_proxy::host::CallInfo& info() const { return info_; }
  std::string_view request() const { return {reinterpret_cast<const char*>(request_.begin()), request_.size()}; }

  // The plugin's answer (complete_call). Passed to the client unless the call was already answered; a second
  // completion is logged and ignored.
  void Complete(csi_proxy_status_code code, std::string_view message, std::string_view response);

  // Answers the client now with a failure, without the handler (deadline, cancellation, overload, shutdown);
  // the handler, if it runs, sees the call cancelled and its completion is dropped. No-op once answered.
  void Abandon(csi_proxy_status_code code, std::string_view message);

  // The handler sees the call cancelled from now on (call_is_cancelled); it still answers it. An isolated group's
  // runner marks a call so when the host answered it without the handler.
  void MarkCancelled() { cancelled_.store(true, std::memory_order_release); }

  // Runs `listener` once when the call turns cancelled (Abandon, DetachSink) before the plugin completed it, or at
  // once when it is cancelled already: an isolated group's supervisor tells the runner then, so that the handler
  // there sees it as soon as one in process would. A deadline passing is no event: the runner knows the deadline.
  void OnCancelled(std::function<void()> listener);

  // The reactor is gone: nothing may be answered through it any more. Called after it has been answered.
  void DetachSink();

  // Keeps the handle alive for the plugin, which holds only a raw pointer, until it completes the call; and
  // what to run once it has (the group's count of calls in flight). Set before the handler starts.
  void HandOverToPlugin(std::shared_ptr<csi_proxy_host_call> self, std::function<void()> on_completed);

  int64_t DeadlineUnixNs() const;
  bool IsCancelled() const;
  bool completed() const { return completed_.load(std::memory_order_acquire); }

 private:
  // Takes the sink if the call is not answered yet; the caller then answers through it.
  csi_proxy::host::CallAnswerSink* TakeSink();
  // Marks the call cancelled, tells the listener of OnCancelled, and takes the sink as TakeSink does.
  csi_proxy::host::CallAnswerSink* Cancel();

  const csi_proxy::host::CallInfo info_;
  const grpc::Slice request_;
  const std::chrono::steady_clock::time_point started_;
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> completed_{false};  // by the plugin
  std::mutex mu_;
  csi_proxy::host::CallAnswerSink* sink_;  // guarded by mu_; null once answered or detached
  std::function<void()> cancel_listener_;  // guarded by mu_
  std::shared_ptr<csi_proxy_host_call> plugin_ref_;
  std::function<void()> on_completed_;
};

namespace csi_proxy::host {
using CallHandle = std::shared_ptr<csi_proxy_host_call>;
}  // namespace csi_proxy::host

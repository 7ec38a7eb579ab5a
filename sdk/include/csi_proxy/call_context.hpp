// csi_proxy/call_context.hpp: what a handler may ask about its call (deadline, cancellation, caller), and the
// Responder that completes an asynchronous call later from any thread.
#pragma once

#include <chrono>
#include <climits>
#include <cstdint>
#include <string>
#include <utility>

#include "csi_proxy/host_table.hpp"
#include "csi_proxy/status.hpp"

namespace csi_proxy::sdk {

struct PeerCredentials {
  int64_t pid = -1;
  int64_t uid = -1;
  int64_t gid = -1;
};

// What a handler may ask about its call. Valid until the call is completed.
class CallContext {
 public:
  explicit CallContext(csi_proxy_host_call* call) : call_(call) {}

  // The client's deadline; time_point::max() when it set none.
  std::chrono::system_clock::time_point deadline() const {
    int64_t ns = internal::HostApi()->call_deadline_unix_ns(call_);
    if (ns == INT64_MAX) return std::chrono::system_clock::time_point::max();
    return std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::nanoseconds(ns)));
  }
  // True once the client cancelled or the deadline passed: long work should stop and fail.
  bool IsCancelled() const { return internal::HostApi()->call_is_cancelled(call_) != 0; }
  // The caller's pid, uid and gid; -1 for what the host does not know.
  PeerCredentials peer() const {
    // The host writes only what it knows within our struct_size; the rest keeps "unknown".
    csi_proxy_peer_credentials c{sizeof c, -1, -1, -1};
    internal::HostApi()->call_peer_credentials(call_, &c);
    return {c.pid, c.uid, c.gid};
  }

 private:
  csi_proxy_host_call* call_;
};

namespace internal {

inline void CompleteCall(csi_proxy_host_call* call, const Status& status, const std::string& response = {}) {
  const csi_proxy_host_api* api = HostApi();
  api->complete_call(call, static_cast<csi_proxy_status_code>(status.code()), status.message().data(),
                     status.message().size(), reinterpret_cast<const uint8_t*>(response.data()), response.size());
}

}  // namespace internal

// Completes one asynchronous call, from any thread, exactly once. A Responder dropped without Finish fails the
// call with INTERNAL so a client never waits forever.
template <typename Resp>
class Responder {
 public:
  explicit Responder(csi_proxy_host_call* call) : call_(call) {}
  Responder(Responder&& other) noexcept : call_(std::exchange(other.call_, nullptr)) {}
  Responder& operator=(Responder&&) = delete;
  Responder(const Responder&) = delete;
  ~Responder() {
    if (call_ != nullptr) internal::CompleteCall(call_, Internal("the handler dropped the call without answering"));
  }

  CallContext context() const { return CallContext(call_); }

  void Finish(const Status& status, const Resp& response = Resp()) {
    if (call_ == nullptr) return;
    csi_proxy_host_call* call = std::exchange(call_, nullptr);
    if (!status.ok()) return internal::CompleteCall(call, status);
    std::string bytes;
    if (!response.SerializeToString(&bytes)) return internal::CompleteCall(call, Internal("cannot serialize response"));
    internal::CompleteCall(call, status, bytes);
  }

 private:
  csi_proxy_host_call* call_;
};

}  // namespace csi_proxy::sdk

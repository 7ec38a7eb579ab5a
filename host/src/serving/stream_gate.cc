// See stream_gate.h.
#include "serving/stream_gate.h"

#include <spdlog/spdlog.h>

#include <utility>

namespace csi_proxy::host {
namespace {

// One warning every ten seconds at most, with the count of the refusals since the last one.
void LogStreamRefusal(const PeerConnection& conn, const std::string& why) {
  static std::mutex mu;
  static std::chrono::steady_clock::time_point last;  // guarded by mu
  static uint64_t unlogged = 0;                       // guarded by mu
  auto now = std::chrono::steady_clock::now();
  uint64_t before = 0;
  {
    std::lock_guard lock(mu);
    if (last != std::chrono::steady_clock::time_point() && now - last < std::chrono::seconds(10)) {
      ++unlogged;
      return;
    }
    last = now;
    before = std::exchange(unlogged, 0);
  }
  spdlog::warn("refused a stream of {} (pid {}): {}{}", PeerText(conn.creds), conn.creds.pid, why,
               before == 0 ? "" : "; " + std::to_string(before) + " more stream refusals were not logged");
}

}  // namespace

std::shared_ptr<PeerConnection> StreamGate::ConnectionOf(const grpc::ServerContextBase& ctx) const {
  return peers_.Get(ctx.peer());
}

std::optional<StreamRefusal> StreamGate::Open(PeerConnection& conn, StreamAccounts::Kind kind,
                                              StreamAccounts::Ticket& ticket) {
  if (stopping_.load(std::memory_order_relaxed)) {
    return StreamRefusal{grpc::StatusCode::UNAVAILABLE, "the endpoint is stopping; retry later"};
  }
  std::optional<std::string> refused = accounts_->Open(conn, kind, ticket);
  if (!refused) return std::nullopt;
  LogStreamRefusal(conn, *refused);
  return StreamRefusal{grpc::StatusCode::RESOURCE_EXHAUSTED, *refused + "; retry later"};
}

void StreamGate::CallAnswered() {
  // The stop's waiter is woken only while it waits: a call pays no lock otherwise.
  if (in_flight_.fetch_sub(1) == 1 && stopping_.load()) {
    std::lock_guard lock(idle_mu_);
    idle_.notify_all();
  }
}

bool StreamGate::WaitForCalls(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(idle_mu_);
  return idle_.wait_until(lock, deadline, [&] { return in_flight_.load() == 0; });
}

}  // namespace csi_proxy::host

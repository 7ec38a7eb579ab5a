// What every stream of one endpoint passes before it is served, whichever service it is for (the group's methods,
// health, reflection): the record of the connection it came on, the host's stream budget, and whether the
// endpoint is stopping. The gate also counts the endpoint's calls in flight, so that a stop waits for those and
// for nothing else (not for idle connections, health watches or streams still waiting for their request).
#pragma once

#include <grpcpp/server_context.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "serving/peer_table.h"
#include "serving/stream_limits.h"

namespace csi_proxy::host {

// Why a stream is answered before it is served.
struct StreamRefusal {
  grpc::StatusCode code;
  std::string message;
};

class StreamGate {
 public:
  explicit StreamGate(std::shared_ptr<StreamAccounts> accounts) : accounts_(std::move(accounts)) {}

  PeerTable& peers() { return peers_; }
  StreamAccounts& accounts() { return *accounts_; }

  // The connection `ctx`'s stream came on.
  std::shared_ptr<PeerConnection> ConnectionOf(const grpc::ServerContextBase& ctx) const;

  // Opens a stream on `conn` (see StreamAccounts::Open): nullopt with `ticket` set, or the refusal
  // (RESOURCE_EXHAUSTED over a budget, UNAVAILABLE once the endpoint stops), which is logged at most every ten
  // seconds with the count of those not logged.
  std::optional<StreamRefusal> Open(PeerConnection& conn, StreamAccounts::Kind kind, StreamAccounts::Ticket& ticket);

  // A call's request arrived and it goes on to its handler; CallAnswered once its answer has been written.
  void CallStarted() { in_flight_.fetch_add(1); }
  void CallAnswered();

  // Takes no new stream from now on.
  void Stop() { stopping_.store(true); }
  // Waits until no call is in flight or `deadline` passed; true when none is left. After Stop.
  bool WaitForCalls(std::chrono::steady_clock::time_point deadline);
  bool stopping() const { return stopping_.load(); }

 private:
  PeerTable peers_;
  std::shared_ptr<StreamAccounts> accounts_;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> in_flight_{0};
  std::mutex idle_mu_;
  std::condition_variable idle_;
};

}  // namespace csi_proxy::host

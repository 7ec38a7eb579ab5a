// How many HTTP/2 streams the host's endpoints keep open, and for how long one may wait for its request. Every
// stream (a call of a group's method, a health check or watch, a reflection session) is counted from its first
// HEADERS frame until the host finishes it: per connection, per uid, in all, and the health watches in all. A
// stream whose request has not arrived within the request timeout is answered and closed, so that a client
// sending HEADERS and nothing more holds nothing for long. OS-neutral: a connection's record is made when the
// listener hands the connection over, whatever the listener is.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>

#include "abi/peer_credentials.h"

namespace csi_proxy::host {

struct StreamLimits {
  uint32_t per_connection = 100;  // also what each connection's HTTP/2 SETTINGS advertise
  uint32_t per_uid = 1000;
  uint32_t total = 4000;
  uint32_t health_watches = 1000;  // grpc.health.v1.Health/Watch streams in all
  std::chrono::milliseconds request_timeout{std::chrono::seconds(10)};
};

// The streams of one uid, shared by its connections.
struct UidStreams {
  std::atomic<uint32_t> open{0};
};

// One accepted connection as the serving layer knows it: who connected, and its streams.
struct PeerConnection {
  explicit PeerConnection(PeerCredentials c) : creds(std::move(c)) {}
  const PeerCredentials creds;
  std::atomic<uint32_t> open{0};
  std::shared_ptr<UidStreams> uid;  // null for a connection nobody accepted (unknown credentials)
};

// A stream that waits for a request message: linked while its read is outstanding. Whoever unlinks it first, the
// stream when its read completes (StreamAccounts::Arrived) or the reaper at the timeout (RequestTimedOut), decides
// what happens next; the other side then does nothing.
class AwaitingRequest {
 public:
  virtual ~AwaitingRequest() = default;
  // Called by the reaper's thread, once, after it has unlinked the stream; the stream answers and finishes.
  virtual void RequestTimedOut() = 0;

 private:
  friend class StreamAccounts;
  AwaitingRequest* prev_ = nullptr;
  AwaitingRequest* next_ = nullptr;
  std::chrono::steady_clock::time_point since_{};
  bool linked_ = false;  // guarded by its shard's mutex
};

class StreamAccounts {
 public:
  explicit StreamAccounts(StreamLimits limits);
  ~StreamAccounts();
  StreamAccounts(const StreamAccounts&) = delete;
  StreamAccounts& operator=(const StreamAccounts&) = delete;

  const StreamLimits& limits() const { return limits_; }

  // The record of a connection the listener hands over, counted with the other connections of its uid.
  std::shared_ptr<PeerConnection> Connect(PeerCredentials peer);

  enum class Kind { kCall, kWatch };
  // A claim on one stream, given back when it is destroyed or Release()d (before the stream's final answer is
  // sent, so that a client that opens its next stream on seeing the answer finds the place free).
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& other) noexcept { *this = std::move(other); }
    Ticket& operator=(Ticket&& other) noexcept;
    ~Ticket() { Release(); }
    void Release();

   private:
    friend class StreamAccounts;
    StreamAccounts* accounts_ = nullptr;
    PeerConnection* conn_ = nullptr;  // the holder keeps it alive (a shared_ptr declared before the ticket)
    bool watch_ = false;
  };
  // Opens a stream on `conn`: nullopt with `ticket` set, or why not (for a RESOURCE_EXHAUSTED answer).
  std::optional<std::string> Open(PeerConnection& conn, Kind kind, Ticket& ticket);

  // A stream starts waiting for a request message; Arrived when its read completes. Arrived is false when the
  // reaper took the stream first (it then answers it): the caller must then leave the stream alone.
  void Await(AwaitingRequest& stream);
  bool Arrived(AwaitingRequest& stream);

  // Streams open now, in all.
  uint32_t open() const { return total_.load(std::memory_order_relaxed); }
  // Called on the reaper's thread once the streams open fall back after a burst (hundreds opened and closed),
  // when their memory is free and may be given back to the system. Once this returns, the function it replaces is
  // not called any more.
  void OnBurstEnded(std::function<void()> fn);

 private:
  struct Shard {
    std::mutex mu;
    AwaitingRequest* head = nullptr;  // the oldest
    AwaitingRequest* tail = nullptr;
  };
  static constexpr size_t kShards = 8;
  Shard& ShardOf(const AwaitingRequest& stream);
  void Unlink(Shard& shard, AwaitingRequest& stream);
  void Reap();

  const StreamLimits limits_;
  std::atomic<uint32_t> total_{0};
  std::atomic<uint32_t> watches_{0};
  std::atomic<uint32_t> high_{0};  // the most streams open at once since the last burst ended
  std::mutex uids_mu_;
  // By the caller's user: its uid, or on Windows its user SID.
  std::unordered_map<std::string, std::weak_ptr<UidStreams>> uids_;  // guarded by uids_mu_
  Shard shards_[kShards];

  std::mutex reaper_mu_;
  std::condition_variable reaper_wake_;
  bool stopping_ = false;                 // guarded by reaper_mu_
  std::function<void()> on_burst_ended_;  // guarded by reaper_mu_
  std::thread reaper_;
};

}  // namespace csi_proxy::host

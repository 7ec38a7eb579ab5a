// See stream_limits.h.
#include "serving/stream_limits.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace csi_proxy::host {
namespace {

// Takes one place of `count` unless it holds `limit` already.
bool Take(std::atomic<uint32_t>& count, uint32_t limit) {
  if (count.fetch_add(1, std::memory_order_relaxed) < limit) return true;
  count.fetch_sub(1, std::memory_order_relaxed);
  return false;
}

// How often the reaper looks for streams past the request timeout: a stream waits at most this much longer.
std::chrono::milliseconds ReapEvery(std::chrono::milliseconds timeout) {
  return std::clamp(timeout / 4, std::chrono::milliseconds(50), std::chrono::milliseconds(1000));
}

// A burst worth giving memory back for: this many streams open at once more than now (a stream holds 20 to 30 KiB
// of gRPC's memory while it is open).
constexpr uint32_t kBurst = 256;

}  // namespace

StreamAccounts::StreamAccounts(StreamLimits limits) : limits_(limits) {
  reaper_ = std::thread([this] { Reap(); });
}

StreamAccounts::~StreamAccounts() {
  {
    std::lock_guard lock(reaper_mu_);
    stopping_ = true;
  }
  reaper_wake_.notify_all();
  reaper_.join();
}

std::shared_ptr<PeerConnection> StreamAccounts::Connect(PeerCredentials peer) {
  auto conn = std::make_shared<PeerConnection>(std::move(peer));
  std::lock_guard lock(uids_mu_);
  std::weak_ptr<UidStreams>& slot =
      uids_[conn->creds.user_sid.empty() ? std::to_string(conn->creds.uid) : conn->creds.user_sid];
  conn->uid = slot.lock();
  if (!conn->uid) {
    conn->uid = std::make_shared<UidStreams>();
    slot = conn->uid;
  }
  // Uids come and go with their connections; forget those without any once the table has grown.
  if (uids_.size() > 1024) std::erase_if(uids_, [](const auto& entry) { return entry.second.expired(); });
  return conn;
}

std::optional<std::string> StreamAccounts::Open(PeerConnection& conn, Kind kind, Ticket& ticket) {
  ticket.Release();
  if (!Take(total_, limits_.total)) {
    return "the host holds its maximum of " + std::to_string(limits_.total) + " streams";
  }
  if (conn.uid && !Take(conn.uid->open, limits_.per_uid)) {
    total_.fetch_sub(1, std::memory_order_relaxed);
    return PeerText(conn.creds) + " holds its maximum of " + std::to_string(limits_.per_uid) + " streams";
  }
  if (!Take(conn.open, limits_.per_connection)) {
    if (conn.uid) conn.uid->open.fetch_sub(1, std::memory_order_relaxed);
    total_.fetch_sub(1, std::memory_order_relaxed);
    return "the connection holds its maximum of " + std::to_string(limits_.per_connection) + " streams";
  }
  if (kind == Kind::kWatch && !Take(watches_, limits_.health_watches)) {
    conn.open.fetch_sub(1, std::memory_order_relaxed);
    if (conn.uid) conn.uid->open.fetch_sub(1, std::memory_order_relaxed);
    total_.fetch_sub(1, std::memory_order_relaxed);
    return "the host holds its maximum of " + std::to_string(limits_.health_watches) + " health watches";
  }
  // The most streams open at once, for the reaper's burst check; written only when a new peak is reached.
  for (uint32_t now = total_.load(std::memory_order_relaxed), high = high_.load(std::memory_order_relaxed);
       now > high && !high_.compare_exchange_weak(high, now, std::memory_order_relaxed);) {
  }
  ticket.accounts_ = this;
  ticket.conn_ = &conn;
  ticket.watch_ = kind == Kind::kWatch;
  return std::nullopt;
}

StreamAccounts::Ticket& StreamAccounts::Ticket::operator=(Ticket&& other) noexcept {
  if (this != &other) {
    Release();
    accounts_ = std::exchange(other.accounts_, nullptr);
    conn_ = std::exchange(other.conn_, nullptr);
    watch_ = other.watch_;
  }
  return *this;
}

void StreamAccounts::Ticket::Release() {
  if (accounts_ == nullptr) return;
  if (watch_) accounts_->watches_.fetch_sub(1, std::memory_order_relaxed);
  conn_->open.fetch_sub(1, std::memory_order_relaxed);
  if (conn_->uid) conn_->uid->open.fetch_sub(1, std::memory_order_relaxed);
  accounts_->total_.fetch_sub(1, std::memory_order_relaxed);
  accounts_ = nullptr;
  conn_ = nullptr;
}

StreamAccounts::Shard& StreamAccounts::ShardOf(const AwaitingRequest& stream) {
  return shards_[(reinterpret_cast<uintptr_t>(&stream) >> 6) % kShards];
}

void StreamAccounts::Await(AwaitingRequest& stream) {
  Shard& shard = ShardOf(stream);
  std::lock_guard lock(shard.mu);
  // Taken under the lock, so that each shard's list stays in the order of its times.
  stream.since_ = std::chrono::steady_clock::now();
  stream.prev_ = shard.tail;
  stream.next_ = nullptr;
  (shard.tail ? shard.tail->next_ : shard.head) = &stream;
  shard.tail = &stream;
  stream.linked_ = true;
}

bool StreamAccounts::Arrived(AwaitingRequest& stream) {
  Shard& shard = ShardOf(stream);
  std::lock_guard lock(shard.mu);
  if (!stream.linked_) return false;
  Unlink(shard, stream);
  return true;
}

void StreamAccounts::Unlink(Shard& shard, AwaitingRequest& stream) {
  (stream.prev_ ? stream.prev_->next_ : shard.head) = stream.next_;
  (stream.next_ ? stream.next_->prev_ : shard.tail) = stream.prev_;
  stream.prev_ = stream.next_ = nullptr;
  stream.linked_ = false;
}

void StreamAccounts::OnBurstEnded(std::function<void()> fn) {
  std::lock_guard lock(reaper_mu_);
  on_burst_ended_ = std::move(fn);
}

void StreamAccounts::Reap() {
  const auto every = ReapEvery(limits_.request_timeout);
  std::unique_lock lock(reaper_mu_);
  while (!reaper_wake_.wait_for(lock, every, [&] { return stopping_; })) {
    lock.unlock();
    // Each shard's list is oldest first: take the streams past the timeout from its head. Once unlinked here, a
    // stream stays alive until it finishes, and only RequestTimedOut finishes it (its read completing finds it
    // unlinked and leaves it alone).
    std::vector<AwaitingRequest*> expired;
    const auto cutoff = std::chrono::steady_clock::now() - limits_.request_timeout;
    for (Shard& shard : shards_) {
      std::lock_guard shard_lock(shard.mu);
      while (shard.head != nullptr && shard.head->since_ <= cutoff) {
        AwaitingRequest* stream = shard.head;
        Unlink(shard, *stream);
        expired.push_back(stream);
      }
    }
    for (AwaitingRequest* stream : expired) stream->RequestTimedOut();
    // The peak since memory was last given back, and it starts again from what is open now.
    uint32_t now = open();
    bool burst_ended = high_.load(std::memory_order_relaxed) >= now + kBurst;
    if (burst_ended) high_.store(now, std::memory_order_relaxed);
    lock.lock();
    // Under the lock, so that once OnBurstEnded has replaced it, the one before is never called again.
    if (burst_ended && on_burst_ended_) on_burst_ended_();
  }
}

}  // namespace csi_proxy::host

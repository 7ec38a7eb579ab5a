// See listeners.h: on Windows the accept loop is an I/O completion port. Each endpoint's pipe listener
// (NamedPipeListener, owned by its ListeningSocket) hands connected pipes to the port's threads; the loop reads
// the client's identity from the pipe (its process id and its token's SIDs), counts the connection against the
// limits (in all, per user SID, per endpoint), waits for the HTTP/2 client preface, then gives the connection a
// private loopback socket pair: the relay pumps bytes between the pipe and one end, and the endpoint's gRPC server
// adopts the other (docs/windows.md, "The named-pipe transport").
#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string_view>
#include <thread>

#include "serving/listeners.h"

#include "abi/peer_process.h"
#include "serving/loopback_pair_windows.h"
#include "serving/named_pipe_listener_windows.h"
#include "serving/pipe_client_identity_windows.h"
#include "serving/pipe_relay_windows.h"

namespace csi_proxy::host {
namespace {

// What every HTTP/2 client sends first (RFC 9113, section 3.4).
constexpr std::string_view kHttp2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
static_assert(kHttp2Preface.size() == 24);

constexpr int kPortThreads = 2;

NamedPipeListener* ListenerOf(const ListeningSocket& socket) {
  return reinterpret_cast<NamedPipeListener*>(socket.native_handle());
}

}  // namespace

size_t ConnectionsTheProcessCanHold(size_t wanted) { return wanted; }  // handles are no scarce resource here

class AcceptLoop::Impl {
 public:
  ~Impl();
  Status Start(ConnectionLimits limits);
  void Stop();
  void Add(NamedPipeListener* listener, OnConnection on_connection);
  void Remove(NamedPipeListener* listener);

 private:
  void Accept(NamedPipeListener* listener);  // starts the listener on the port
  struct Registered {
    OnConnection on_connection;
    uint64_t id = 0;     // tells an endpoint apart from a later one at the same address
    int handing_on = 0;  // guarded by mu_: calls of on_connection running
  };
  // A connection accepted and counted, from its identification until the relay takes it.
  struct Held : IoPort::Operation {
    Impl* loop = nullptr;
    NamedPipeListener* listener = nullptr;
    std::shared_ptr<Registered> registered;  // as it was when the connection came
    UniqueHandle pipe;
    PeerCredentials peer;
    char preface[kHttp2Preface.size()] = {};
    size_t received = 0;
    std::chrono::steady_clock::time_point deadline;
    void Completed(DWORD bytes, DWORD error) override { loop->PrefaceRead(this, bytes, error); }
  };
  // Logs how many connections were turned away and the latest reason, at most every ten seconds.
  struct RateLimitedWarning {
    std::mutex mu;
    uint64_t count = 0;
    std::chrono::steady_clock::time_point last{};
    void Add(const std::string& what, const std::string& why);
  };

  void Connected(NamedPipeListener* listener, UniqueHandle pipe);
  // Counts the connection in, or says why not (the host, its user or its endpoint is at its limit).
  std::string Admit(const PeerCredentials& peer, uint64_t endpoint);
  void Forget(const std::string& user, uint64_t endpoint);
  bool ReadPreface(Held* held);  // false: the read could not start (the connection is dropped)
  void PrefaceRead(Held* held, DWORD bytes, DWORD error);
  void Drop(Held* held);
  void HandOn(Held* held);
  void ExpireHeld();

  ConnectionLimits limits_;
  IoPort port_;
  std::unique_ptr<PipeRelay> relay_;
  RateLimitedWarning refused_;
  RateLimitedWarning timed_out_;

  std::mutex mu_;
  std::condition_variable changed_;
  std::map<NamedPipeListener*, std::shared_ptr<Registered>> listeners_;  // guarded by mu_
  std::set<Held*> held_;                                                 // guarded by mu_: waiting for their preface
  size_t total_ = 0;                                                     // guarded by mu_, and the two below
  std::map<std::string, size_t> per_user_;
  std::map<uint64_t, size_t> per_endpoint_;  // by Registered::id
  uint64_t next_id_ = 1;                     // guarded by mu_
  bool started_ = false;                     // guarded by mu_: Start has run; listeners added accept at once
  bool stopping_ = false;                    // guarded by mu_
  std::thread expiry_;                       // closes held connections at their deadline
};

AcceptLoop::AcceptLoop() : impl_(std::make_unique<Impl>()) {}
AcceptLoop::~AcceptLoop() { impl_->Stop(); }
Status AcceptLoop::Start(ConnectionLimits limits) { return impl_->Start(limits); }
void AcceptLoop::Stop() { impl_->Stop(); }
void AcceptLoop::Add(const ListeningSocket& socket, OnConnection on_connection) {
  impl_->Add(ListenerOf(socket), std::move(on_connection));
}
void AcceptLoop::Remove(const ListeningSocket& socket) { impl_->Remove(ListenerOf(socket)); }

void AcceptLoop::Impl::RateLimitedWarning::Add(const std::string& what, const std::string& why) {
  std::lock_guard lock(mu);
  ++count;
  auto now = std::chrono::steady_clock::now();
  if (now - last < std::chrono::seconds(10)) return;
  spdlog::warn("{} {} connection(s): {}", what, count, why);
  count = 0;
  last = now;
}

Status AcceptLoop::Impl::Start(ConnectionLimits limits) {
  limits_ = limits;
  if (!EnsureWinsock()) return Internal("Winsock did not start");
  CSI_PROXY_RETURN_IF_ERROR(port_.Start(kPortThreads));
  relay_ = std::make_unique<PipeRelay>(port_);
  expiry_ = std::thread([this] { ExpireHeld(); });
  std::vector<NamedPipeListener*> added;
  {
    std::lock_guard lock(mu_);
    started_ = true;
    for (const auto& [listener, registered] : listeners_) added.push_back(listener);
  }
  for (NamedPipeListener* listener : added) Accept(listener);
  return Status::Ok();
}

void AcceptLoop::Impl::Stop() {
  std::vector<NamedPipeListener*> listeners;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    for (const auto& [listener, registered] : listeners_) listeners.push_back(listener);
    for (Held* held : held_) CancelIoEx(held->pipe.get(), held);
  }
  changed_.notify_all();
  for (NamedPipeListener* listener : listeners) Remove(listener);
  std::unique_lock lock(mu_);
  changed_.wait(lock, [this] { return held_.empty(); });
  lock.unlock();
  if (expiry_.joinable()) expiry_.join();
  // Connections already handed on stay: gRPC ends them when the endpoints' servers stop, and the relay with them.
}

AcceptLoop::Impl::~Impl() {
  Stop();
  if (relay_) relay_->CloseAll();
  relay_.reset();
  port_.Stop();
}

void AcceptLoop::Impl::Add(NamedPipeListener* listener, OnConnection on_connection) {
  auto registered = std::make_shared<Registered>();
  registered->on_connection = std::move(on_connection);
  bool started = false;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    registered->id = next_id_++;
    listeners_[listener] = registered;
    started = started_;
  }
  if (started) Accept(listener);  // otherwise Start does
}

void AcceptLoop::Impl::Accept(NamedPipeListener* listener) {
  Status accepting =
      listener->Start(port_, [this, listener](UniqueHandle pipe) { Connected(listener, std::move(pipe)); });
  if (!accepting.ok()) {
    spdlog::error("cannot accept on \\\\.\\pipe\\{}: {}", listener->name(), accepting.message());
    std::lock_guard lock(mu_);
    listeners_.erase(listener);
  }
}

void AcceptLoop::Impl::Remove(NamedPipeListener* listener) {
  std::shared_ptr<Registered> registered;
  {
    std::lock_guard lock(mu_);
    auto it = listeners_.find(listener);
    if (it == listeners_.end()) return;
    registered = it->second;
    listeners_.erase(it);
    // Connections still waiting for their preface will not be handed on.
    for (Held* held : held_) {
      if (held->listener == listener) CancelIoEx(held->pipe.get(), held);
    }
  }
  listener->Close();  // no Connected() for it runs after this
  std::unique_lock lock(mu_);
  changed_.wait(lock, [&] { return registered->handing_on == 0; });
}

std::string AcceptLoop::Impl::Admit(const PeerCredentials& peer, uint64_t endpoint) {
  std::lock_guard lock(mu_);
  if (total_ >= limits_.max_total) {
    return "the host holds its maximum of " + std::to_string(limits_.max_total) + " connections";
  }
  if (per_user_[peer.user_sid] >= limits_.max_per_uid) {
    return "user " + peer.user_sid + " holds its maximum of " + std::to_string(limits_.max_per_uid) + " connections";
  }
  if (per_endpoint_[endpoint] >= limits_.max_per_endpoint) {
    return "an endpoint holds its maximum of " + std::to_string(limits_.max_per_endpoint) + " connections";
  }
  ++total_;
  ++per_user_[peer.user_sid];
  ++per_endpoint_[endpoint];
  return "";
}

void AcceptLoop::Impl::Forget(const std::string& user, uint64_t endpoint) {
  std::lock_guard lock(mu_);
  --total_;
  if (--per_user_[user] == 0) per_user_.erase(user);
  if (--per_endpoint_[endpoint] == 0) per_endpoint_.erase(endpoint);
}

void AcceptLoop::Impl::Connected(NamedPipeListener* listener, UniqueHandle pipe) {
  std::shared_ptr<Registered> registered;
  {
    std::lock_guard lock(mu_);
    auto it = listeners_.find(listener);
    if (it == listeners_.end() || stopping_) return;
    registered = it->second;
  }
  UniqueHandle process;
  auto identity = IdentifyPipeClient(pipe.get(), FileTimeNow(), limits_.pin_peer_process ? &process : nullptr);
  if (!identity.ok()) {
    // Nobody to answer for the connection: it is closed unserved.
    refused_.Add("refused", identity.status().message());
    return;
  }
  auto held = std::make_unique<Held>();
  held->loop = this;
  held->listener = listener;
  held->registered = std::move(registered);
  held->pipe = std::move(pipe);
  held->peer.pid = identity->pid;
  held->peer.user_sid = std::move(identity->user_sid);
  held->peer.group_sids = std::move(identity->group_sids);
  if (limits_.pin_peer_process) held->peer.process = PeerProcess::Of(reinterpret_cast<intptr_t>(process.release()));
  if (std::string why = Admit(held->peer, held->registered->id); !why.empty()) {
    refused_.Add("refused", why);
    return;
  }
  if (limits_.handshake_timeout.count() == 0) return HandOn(held.release());
  held->deadline = std::chrono::steady_clock::now() + limits_.handshake_timeout;
  Held* raw = held.release();
  if (!ReadPreface(raw)) Drop(raw);
  changed_.notify_all();  // a new deadline for the expiry thread
}

bool AcceptLoop::Impl::ReadPreface(Held* held) {
  // Under the lock, so that Remove and Stop, which cancel the reads of held connections under it, see this one.
  std::lock_guard lock(mu_);
  auto it = listeners_.find(held->listener);
  if (stopping_ || it == listeners_.end() || it->second != held->registered) return false;
  held_.insert(held);
  held->Reset();
  DWORD wanted = static_cast<DWORD>(kHttp2Preface.size() - held->received);
  return ReadFile(held->pipe.get(), held->preface + held->received, wanted, nullptr, held) ||
         GetLastError() == ERROR_IO_PENDING;
}

void AcceptLoop::Impl::PrefaceRead(Held* held, DWORD bytes, DWORD error) {
  if (error != 0 || bytes == 0) {
    if (error == ERROR_OPERATION_ABORTED && std::chrono::steady_clock::now() >= held->deadline) {
      timed_out_.Add("closed", "no HTTP/2 client preface within " + std::to_string(limits_.handshake_timeout.count()) +
                                   " ms of connecting");
    }
    return Drop(held);  // hung up, broken, past its deadline, or its endpoint went away
  }
  size_t before = held->received;
  held->received += bytes;
  if (std::string_view(held->preface + before, bytes) != kHttp2Preface.substr(before, bytes)) {
    refused_.Add("refused", "a client sent something other than HTTP/2");
    return Drop(held);
  }
  if (held->received < kHttp2Preface.size()) {
    if (!ReadPreface(held)) Drop(held);
    return;
  }
  {
    std::lock_guard lock(mu_);
    held_.erase(held);
  }
  changed_.notify_all();
  HandOn(held);
}

void AcceptLoop::Impl::Drop(Held* held) {
  std::unique_ptr<Held> owned(held);
  Forget(owned->peer.user_sid, owned->registered->id);
  std::lock_guard lock(mu_);
  held_.erase(held);
  changed_.notify_all();
}

void AcceptLoop::Impl::HandOn(Held* held) {
  std::unique_ptr<Held> owned(held);
  const std::string user = owned->peer.user_sid;
  const uint64_t endpoint = owned->registered->id;
  bool current = false;
  {
    std::lock_guard lock(mu_);
    auto it = listeners_.find(owned->listener);
    current = !stopping_ && it != listeners_.end() && it->second == owned->registered;
    if (current) ++owned->registered->handing_on;  // Remove waits for it
  }
  if (!current) return Forget(user, endpoint);  // its endpoint went away meanwhile
  auto done = [&] {
    {
      std::lock_guard lock(mu_);
      --owned->registered->handing_on;
    }
    changed_.notify_all();
  };
  auto pair = MakeLoopbackPair();
  if (!pair.ok()) {
    refused_.Add("refused", "no loopback socket pair for the relay: " + pair.status().message());
    Forget(user, endpoint);
    return done();
  }
  std::string preface(owned->preface, owned->received);
  Status relayed = relay_->Add(std::move(owned->pipe), std::move(pair->connected), std::move(preface),
                               [this, user, endpoint] { Forget(user, endpoint); });
  if (!relayed.ok()) {
    refused_.Add("refused", "cannot relay the pipe: " + relayed.message());
    Forget(user, endpoint);
    return done();
  }
  // From here the relay ends the pipe when gRPC ends the connection, and the other way round.
  owned->registered->on_connection(Connection{static_cast<intptr_t>(pair->accepted.release())}, owned->peer);
  done();
}

void AcceptLoop::Impl::ExpireHeld() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    auto now = std::chrono::steady_clock::now();
    auto next = std::chrono::steady_clock::time_point::max();
    for (Held* held : held_) {
      if (held->deadline <= now) {
        CancelIoEx(held->pipe.get(), held);  // its completion drops it
      } else {
        next = std::min(next, held->deadline);
      }
    }
    if (next == std::chrono::steady_clock::time_point::max()) {
      changed_.wait(lock);
    } else {
      changed_.wait_until(lock, next);
    }
  }
}

}  // namespace csi_proxy::host

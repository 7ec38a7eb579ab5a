// See listeners.h: one thread polls every listening socket; a new connection waits in an epoll set for its
// HTTP/2 preface before it is handed on.
#include "serving/listeners.h"

#include "abi/peer_process.h"

#include <fcntl.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

namespace csi_proxy::host {
namespace {

// The credentials the peer connected with: SO_PEERCRED, and its supplementary groups (SO_PEERGROUPS, which says
// how much room it needs when the first guess is short). A peer whose credentials cannot be read has uid -1,
// which no authorization list admits.
PeerCredentials PeerOf(int conn) {
  PeerCredentials peer;
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return peer;
  std::vector<gid_t> groups(32);
  for (int attempt = 0; attempt < 2; ++attempt) {
    socklen_t size = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (getsockopt(conn, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &size) == 0) {
      groups.resize(size / sizeof(gid_t));
      peer.groups.assign(groups.begin(), groups.end());
      break;
    }
    if (errno != ERANGE) break;  // no supplementary groups counted then: the lists see fewer gids, never more
    groups.resize(size / sizeof(gid_t) + 1);
  }
  peer.pid = cred.pid;
  peer.uid = cred.uid;
  peer.gid = cred.gid;
  return peer;
}

// What every HTTP/2 client sends first (RFC 9113, section 3.4).
constexpr std::string_view kHttp2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
static_assert(kHttp2Preface.size() == 24);

}  // namespace

class AcceptLoop::Impl {
 public:
  Status Start(ConnectionLimits limits);
  void Stop();
  void Add(int listen_fd, OnConnection on_connection);
  void Remove(int listen_fd);

  void Run();
  void Wake();
  struct Listener {
    OnConnection on_connection;
    uint64_t id;  // tells a socket apart from a later one that got the same fd number
  };
  void AcceptAll(int listen_fd, const Listener& listener);
  // Counts the connection in, or refuses it (false) when its uid, its endpoint or the host is at its limit.
  bool Admit(int conn, int listen_fd, const PeerCredentials& peer);
  // Stops counting a connection the loop closes itself.
  void Forget(int conn);
  // Forgets connections gRPC has closed since (their fd is gone or now names another file).
  void Reconcile();
  // Waits (edge-triggered) for the HTTP/2 client preface of a new connection.
  void Hold(int conn, int listen_fd, uint64_t listener_id, const PeerCredentials& peer);
  // Looks at what a held connection has sent: hands it on once the whole preface is there, closes it when it
  // sent anything else or hung up, and otherwise keeps waiting.
  void CheckPreface(int conn, const std::map<int, Listener>& current);
  // Closes held connections whose socket was removed, and those past their deadline. Returns the time until the
  // next deadline for poll(), -1 if none.
  int ExpireHeld(const std::map<int, Listener>& current);
  void CloseHeld(int conn);

  // Logs how many connections were turned away and the latest reason, at most every ten seconds.
  struct RateLimitedWarning {
    uint64_t count = 0;
    std::chrono::steady_clock::time_point last{};
    void Add(const std::string& what, const std::string& why);
  };

  ConnectionLimits limits_;
  // Touched by the loop thread only.
  struct Counted {
    ino_t inode;
    int64_t uid;
    int listen_fd;
    bool unlisted;  // counted in unlisted_
  };
  std::map<int, Counted> connections_;
  std::map<int64_t, size_t> per_uid_;
  std::map<int, size_t> per_endpoint_;  // by listening socket
  size_t unlisted_ = 0;                 // connections of callers no authorization list names
  struct Held {
    int listen_fd;
    uint64_t listener_id;
    PeerCredentials peer;
    std::chrono::steady_clock::time_point deadline;
  };
  std::map<int, Held> held_;  // connections waiting for their preface, by fd
  int epoll_fd_ = -1;         // the held connections
  int reserve_fd_ = -1;       // given up to accept-and-close a connection when the process is out of descriptors
  RateLimitedWarning refused_;
  RateLimitedWarning timed_out_;
  std::chrono::steady_clock::time_point last_reconcile_{};

  std::mutex mu_;
  std::condition_variable changed_;
  std::map<int, Listener> listeners_;  // guarded by mu_
  uint64_t generation_ = 0;            // guarded by mu_: bumped by every Add/Remove
  uint64_t seen_generation_ = 0;       // guarded by mu_: the generation the loop polls with
  bool stopping_ = false;              // guarded by mu_
  int wake_fd_ = -1;
  std::thread thread_;
};

AcceptLoop::AcceptLoop() : impl_(std::make_unique<Impl>()) {}
AcceptLoop::~AcceptLoop() { impl_->Stop(); }
Status AcceptLoop::Start(ConnectionLimits limits) { return impl_->Start(limits); }
void AcceptLoop::Stop() { impl_->Stop(); }
void AcceptLoop::Add(const ListeningSocket& socket, OnConnection on_connection) {
  impl_->Add(static_cast<int>(socket.native_handle()), std::move(on_connection));
}
void AcceptLoop::Remove(const ListeningSocket& socket) { impl_->Remove(static_cast<int>(socket.native_handle())); }

size_t ConnectionsTheProcessCanHold(size_t wanted) {
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) != 0 || nofile.rlim_cur == RLIM_INFINITY) return wanted;
  constexpr rlim_t kHeadroom = 128;
  return std::min<size_t>(wanted, nofile.rlim_cur > 2 * kHeadroom ? nofile.rlim_cur - kHeadroom : nofile.rlim_cur / 2);
}

Status AcceptLoop::Impl::Start(ConnectionLimits limits) {
  limits_ = limits;
  reserve_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) return Internal(std::string("eventfd: ") + std::strerror(errno));
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) return Internal(std::string("epoll_create1: ") + std::strerror(errno));
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

void AcceptLoop::Impl::Stop() {
  if (thread_.joinable()) {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    Wake();
    thread_.join();
  }
  if (wake_fd_ >= 0) close(wake_fd_);
  wake_fd_ = -1;
  for (const auto& [conn, held] : held_) close(conn);
  held_.clear();
  if (epoll_fd_ >= 0) close(epoll_fd_);
  epoll_fd_ = -1;
  if (reserve_fd_ >= 0) close(reserve_fd_);
  reserve_fd_ = -1;
}

void AcceptLoop::Impl::Wake() {
  uint64_t one = 1;
  if (wake_fd_ >= 0 && write(wake_fd_, &one, sizeof one) < 0) {
    spdlog::warn("cannot wake the accept loop: {}", std::strerror(errno));
  }
}

void AcceptLoop::Impl::Add(int listen_fd, OnConnection on_connection) {
  std::lock_guard lock(mu_);
  ++generation_;
  listeners_[listen_fd] = {std::move(on_connection), generation_};
  Wake();
}

void AcceptLoop::Impl::Remove(int listen_fd) {
  std::unique_lock lock(mu_);
  if (listeners_.erase(listen_fd) == 0) return;
  uint64_t wanted = ++generation_;
  if (!thread_.joinable() || stopping_) return;
  Wake();
  // The loop takes a new snapshot only between rounds, so once it has seen this generation it is no longer
  // inside a callback of the removed socket.
  changed_.wait(lock, [&] { return seen_generation_ >= wanted || stopping_; });
}

void AcceptLoop::Impl::AcceptAll(int listen_fd, const Listener& listener) {
  for (;;) {
    int conn = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (conn < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if ((errno == EMFILE || errno == ENFILE) && reserve_fd_ >= 0) {
        // Out of descriptors: the pending connection would keep the socket readable and this loop spinning.
        // Give up the reserve to take it, close it, and take the reserve back.
        close(reserve_fd_);
        int dropped = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (dropped >= 0) close(dropped);
        reserve_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
        refused_.Add("refused", "the process is out of file descriptors");
        continue;
      }
      if (errno != EAGAIN) spdlog::warn("accept failed: {}", std::strerror(errno));
      return;  // EAGAIN: drained
    }
    PeerCredentials peer = PeerOf(conn);
    if (!Admit(conn, listen_fd, peer)) {
      close(conn);
      continue;
    }
    if (limits_.pin_peer_process) peer.process = PeerProcess::Of(conn);
    if (limits_.handshake_timeout.count() > 0) {
      Hold(conn, listen_fd, listener.id, peer);
    } else {
      listener.on_connection(Connection{conn}, peer);
    }
  }
}

bool AcceptLoop::Impl::Admit(int conn, int listen_fd, const PeerCredentials& peer) {
  struct stat st {};
  if (fstat(conn, &st) != 0) return false;
  // The fd number of a connection gRPC closed may come back: forget what it was.
  Forget(conn);
  const bool unlisted = limits_.listed && !limits_.listed(peer);
  auto why = [&]() -> std::string {
    if (connections_.size() >= limits_.max_total) {
      return "the host holds its maximum of " + std::to_string(limits_.max_total) + " connections";
    }
    if (unlisted && unlisted_ >= limits_.max_unlisted) {
      return "callers in no authorization list (uid " + std::to_string(peer.uid) + ") hold their maximum of " +
             std::to_string(limits_.max_unlisted) + " connections";
    }
    if (per_uid_[peer.uid] >= limits_.max_per_uid) {
      return "uid " + std::to_string(peer.uid) + " holds its maximum of " + std::to_string(limits_.max_per_uid) +
             " connections";
    }
    if (per_endpoint_[listen_fd] >= limits_.max_per_endpoint) {
      return "an endpoint holds its maximum of " + std::to_string(limits_.max_per_endpoint) + " connections";
    }
    return "";
  };
  if (!why().empty()) Reconcile();
  if (std::string reason = why(); !reason.empty()) {
    refused_.Add("refused", reason);
    return false;
  }
  connections_[conn] = {st.st_ino, peer.uid, listen_fd, unlisted};
  ++per_uid_[peer.uid];
  ++per_endpoint_[listen_fd];
  if (unlisted) ++unlisted_;
  return true;
}

void AcceptLoop::Impl::Forget(int conn) {
  auto it = connections_.find(conn);
  if (it == connections_.end()) return;
  --per_uid_[it->second.uid];
  --per_endpoint_[it->second.listen_fd];
  if (it->second.unlisted) --unlisted_;
  connections_.erase(it);
}

void AcceptLoop::Impl::Hold(int conn, int listen_fd, uint64_t listener_id, const PeerCredentials& peer) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | EPOLLET;
  ev.data.fd = conn;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, conn, &ev) != 0) {
    spdlog::warn("cannot wait for a new connection's first bytes: {}", std::strerror(errno));
    Forget(conn);
    close(conn);
    return;
  }
  // Bytes already there are reported by the next epoll_wait, edge-triggered or not.
  held_[conn] = {listen_fd, listener_id, peer, std::chrono::steady_clock::now() + limits_.handshake_timeout};
}

void AcceptLoop::Impl::CloseHeld(int conn) {
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, conn, nullptr);
  held_.erase(conn);
  Forget(conn);
  close(conn);
}

void AcceptLoop::Impl::CheckPreface(int conn, const std::map<int, Listener>& current) {
  auto it = held_.find(conn);
  if (it == held_.end()) return;
  char buf[kHttp2Preface.size()];
  ssize_t n = recv(conn, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;  // nothing yet
  if (n <= 0) {
    CloseHeld(conn);  // hung up or broken
    return;
  }
  if (std::string_view(buf, static_cast<size_t>(n)) != kHttp2Preface.substr(0, static_cast<size_t>(n))) {
    refused_.Add("refused", "a client sent something other than HTTP/2");
    CloseHeld(conn);
    return;
  }
  if (static_cast<size_t>(n) < kHttp2Preface.size()) return;  // a part: the rest raises the next edge
  Held held = it->second;
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, conn, nullptr);
  held_.erase(it);
  auto listener = current.find(held.listen_fd);
  if (listener == current.end() || listener->second.id != held.listener_id) {
    Forget(conn);
    close(conn);
    return;
  }
  listener->second.on_connection(Connection{conn}, held.peer);
}

int AcceptLoop::Impl::ExpireHeld(const std::map<int, Listener>& current) {
  auto now = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point next = std::chrono::steady_clock::time_point::max();
  std::vector<int> expired;
  for (const auto& [conn, held] : held_) {
    auto listener = current.find(held.listen_fd);
    bool removed = listener == current.end() || listener->second.id != held.listener_id;
    if (removed || held.deadline <= now) {
      if (!removed) {
        timed_out_.Add("closed", "no HTTP/2 client preface within " +
                                     std::to_string(limits_.handshake_timeout.count()) + " ms of connecting");
      }
      expired.push_back(conn);
    } else {
      next = std::min(next, held.deadline);
    }
  }
  for (int conn : expired) CloseHeld(conn);
  if (next == std::chrono::steady_clock::time_point::max()) return -1;
  auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count() + 1;  // round up
  return static_cast<int>(std::min<int64_t>(wait, 60 * 1000));
}

void AcceptLoop::Impl::Reconcile() {
  // At most ten times a second: a flood at the limit must not turn into a scan per refused connection.
  auto now = std::chrono::steady_clock::now();
  if (now - last_reconcile_ < std::chrono::milliseconds(100)) return;
  last_reconcile_ = now;
  for (auto it = connections_.begin(); it != connections_.end();) {
    struct stat st {};
    if (fstat(it->first, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == it->second.inode) {
      ++it;
      continue;
    }
    --per_uid_[it->second.uid];
    --per_endpoint_[it->second.listen_fd];
    if (it->second.unlisted) --unlisted_;
    it = connections_.erase(it);
  }
}

void AcceptLoop::Impl::RateLimitedWarning::Add(const std::string& what, const std::string& why) {
  ++count;
  auto now = std::chrono::steady_clock::now();
  if (now - last < std::chrono::seconds(10)) return;
  spdlog::warn("{} {} connection(s): {}", what, count, why);
  count = 0;
  last = now;
}

void AcceptLoop::Impl::Run() {
  std::vector<pollfd> fds;
  std::map<int, Listener> current;
  epoll_event events[64];
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) break;
      current = listeners_;
      seen_generation_ = generation_;
    }
    changed_.notify_all();
    fds.clear();
    for (const auto& [fd, listener] : current) fds.push_back({fd, POLLIN, 0});
    fds.push_back({epoll_fd_, POLLIN, 0});
    fds.push_back({wake_fd_, POLLIN, 0});
    int timeout = ExpireHeld(current);
    int n = poll(fds.data(), fds.size(), timeout);
    if (n < 0) {
      if (errno == EINTR) continue;
      spdlog::error("accept loop: poll failed: {}", std::strerror(errno));
      break;
    }
    if (fds.back().revents != 0) {
      uint64_t drained;
      while (read(wake_fd_, &drained, sizeof drained) > 0) {
      }
    }
    if (fds[fds.size() - 2].revents != 0) {
      int ready = epoll_wait(epoll_fd_, events, 64, 0);
      for (int i = 0; i < ready; ++i) CheckPreface(events[i].data.fd, current);
    }
    for (size_t i = 0; i + 2 < fds.size(); ++i) {
      if (fds[i].revents != 0) AcceptAll(fds[i].fd, current.at(fds[i].fd));
    }
  }
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
}

}  // namespace csi_proxy::host

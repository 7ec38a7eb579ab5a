// See listeners.h.
#include "listeners.h"

#include <fcntl.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
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

}  // namespace

void PeerTable::Set(int fd, PeerCredentials creds) {
  std::lock_guard lock(mu_);
  by_fd_[fd] = creds;
}

PeerCredentials PeerTable::Get(const std::string& grpc_peer) const {
  if (grpc_peer.rfind("fd:", 0) != 0) return {};
  int fd = std::atoi(grpc_peer.c_str() + 3);
  std::lock_guard lock(mu_);
  auto it = by_fd_.find(fd);
  return it == by_fd_.end() ? PeerCredentials{} : it->second;
}

Status AcceptLoop::Start(ConnectionLimits limits) {
  limits_ = limits;
  reserve_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) return Internal(std::string("eventfd: ") + std::strerror(errno));
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

void AcceptLoop::Stop() {
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
  if (reserve_fd_ >= 0) close(reserve_fd_);
  reserve_fd_ = -1;
}

void AcceptLoop::Wake() {
  uint64_t one = 1;
  if (wake_fd_ >= 0 && write(wake_fd_, &one, sizeof one) < 0) {
    spdlog::warn("cannot wake the accept loop: {}", std::strerror(errno));
  }
}

void AcceptLoop::Add(int listen_fd, OnConnection on_connection) {
  std::lock_guard lock(mu_);
  listeners_[listen_fd] = std::move(on_connection);
  ++generation_;
  Wake();
}

void AcceptLoop::Remove(int listen_fd) {
  std::unique_lock lock(mu_);
  if (listeners_.erase(listen_fd) == 0) return;
  uint64_t wanted = ++generation_;
  if (!thread_.joinable() || stopping_) return;
  Wake();
  // The loop takes a new snapshot only between rounds, so once it has seen this generation it is no longer
  // inside a callback of the removed socket.
  changed_.wait(lock, [&] { return seen_generation_ >= wanted || stopping_; });
}

void AcceptLoop::AcceptAll(int listen_fd, const OnConnection& on_connection) {
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
        WarnRefused("the process is out of file descriptors");
        continue;
      }
      if (errno != EAGAIN) spdlog::warn("accept failed: {}", std::strerror(errno));
      return;  // EAGAIN: drained
    }
    PeerCredentials peer = PeerOf(conn);
    if (!Admit(conn, peer)) {
      close(conn);
      continue;
    }
    on_connection(conn, peer);
  }
}

bool AcceptLoop::Admit(int conn, const PeerCredentials& peer) {
  struct stat st {};
  if (fstat(conn, &st) != 0) return false;
  // The fd number of a connection gRPC closed may come back: forget what it was.
  if (auto old = connections_.find(conn); old != connections_.end()) {
    --per_uid_[old->second.uid];
    connections_.erase(old);
  }
  auto over = [&] { return connections_.size() >= limits_.max_total || per_uid_[peer.uid] >= limits_.max_per_uid; };
  if (over()) Reconcile();
  if (over()) {
    WarnRefused(connections_.size() >= limits_.max_total
                    ? "the host holds its maximum of " + std::to_string(limits_.max_total) + " connections"
                    : "uid " + std::to_string(peer.uid) + " holds its maximum of " +
                          std::to_string(limits_.max_per_uid) + " connections");
    return false;
  }
  connections_[conn] = {st.st_ino, peer.uid};
  ++per_uid_[peer.uid];
  return true;
}

void AcceptLoop::Reconcile() {
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
    it = connections_.erase(it);
  }
}

void AcceptLoop::WarnRefused(const std::string& why) {
  ++refused_since_warning_;
  auto now = std::chrono::steady_clock::now();
  if (now - last_warning_ < std::chrono::seconds(10)) return;
  spdlog::warn("refused {} connection(s): {}", refused_since_warning_, why);
  refused_since_warning_ = 0;
  last_warning_ = now;
}

void AcceptLoop::Run() {
  std::vector<pollfd> fds;
  std::vector<OnConnection> callbacks;
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) break;
      fds.clear();
      callbacks.clear();
      for (const auto& [fd, cb] : listeners_) {
        fds.push_back({fd, POLLIN, 0});
        callbacks.push_back(cb);
      }
      seen_generation_ = generation_;
    }
    changed_.notify_all();
    fds.push_back({wake_fd_, POLLIN, 0});
    int n = poll(fds.data(), fds.size(), -1);
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
    for (size_t i = 0; i + 1 < fds.size(); ++i) {
      if (fds[i].revents != 0) AcceptAll(fds[i].fd, callbacks[i]);
    }
  }
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
}

}  // namespace csi_proxy::host

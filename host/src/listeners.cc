// See listeners.h.
#include "listeners.h"

#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace csi_proxy::host {

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

Status AcceptLoop::Start() {
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
      if (fds[i].revents == 0) continue;
      for (;;) {
        int conn = accept4(fds[i].fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (conn < 0) break;  // EAGAIN: drained; anything else is logged by the next poll round
        ucred cred{};
        socklen_t len = sizeof cred;
        PeerCredentials peer;
        if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) peer = {cred.pid, cred.uid, cred.gid};
        callbacks[i](conn, peer);
      }
    }
  }
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
}

}  // namespace csi_proxy::host

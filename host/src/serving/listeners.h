// The listening side of the host: one thread accepts the connections of every endpoint socket, records each
// peer's credentials (SO_PEERCRED) and hands the connection to that endpoint's gRPC server.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "abi/call_handle.h"
#include "csi_proxy/status.hpp"

namespace csi_proxy::host {

// How many connections the host keeps open: in all, for one uid and on one endpoint socket, so that a flood of
// idle connections from one caller can neither exhaust the host's file descriptors nor lock other callers out.
struct ConnectionLimits {
  size_t max_total = 4096;
  size_t max_per_uid = 1024;
  size_t max_per_endpoint = 1024;
  // A new connection is handed on only once the 24-byte HTTP/2 client preface has arrived; one that has not sent
  // it within this time (gRPC sets no deadline on a socket it adopts) is closed. Zero hands connections on at once.
  std::chrono::milliseconds handshake_timeout{std::chrono::seconds(10)};
};

class AcceptLoop {
 public:
  // Takes ownership of a connected socket (non-blocking, close-on-exec) and the credentials of its peer.
  using OnConnection = std::function<void(int fd, const PeerCredentials& peer)>;

  AcceptLoop() = default;
  ~AcceptLoop() { Stop(); }
  AcceptLoop(const AcceptLoop&) = delete;
  AcceptLoop& operator=(const AcceptLoop&) = delete;

  Status Start(ConnectionLimits limits = {});
  // Stops accepting on every socket and joins the thread. Idempotent.
  void Stop();

  // Starts or stops accepting on a listening socket; safe from any thread. Once Remove returns, `on_connection`
  // is not running and will not be called again for that socket. The socket itself stays the caller's.
  void Add(int listen_fd, OnConnection on_connection);
  void Remove(int listen_fd);

 private:
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
  struct Connection {
    ino_t inode;
    int64_t uid;
    int listen_fd;
  };
  std::map<int, Connection> connections_;
  std::map<int64_t, size_t> per_uid_;
  std::map<int, size_t> per_endpoint_;  // by listening socket
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

}  // namespace csi_proxy::host

// The listening side of the host: one loop accepts the connections of every endpoint socket, records each
// peer's credentials and hands the connection to that endpoint's gRPC server, within the connection limits.
// listeners_linux.cc: one thread over poll and epoll, credentials from SO_PEERCRED and SO_PEERGROUPS. A Windows
// side goes beside it (named pipes relayed to gRPC), behind this same interface.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>

#include "abi/peer_credentials.h"
#include "csi_proxy/status.hpp"
#include "serving/connection.h"
#include "serving/endpoint_socket.h"

namespace csi_proxy::host {

// How many connections the host keeps open: in all, for one uid and on one endpoint socket, so that a flood of
// idle connections from one caller can neither exhaust the host's file descriptors nor lock other callers out.
struct ConnectionLimits {
  size_t max_total = 4096;
  size_t max_per_uid = 1024;
  size_t max_per_endpoint = 1024;
  // Connections of callers that no group's authorization lists name, all of them together: a small share of
  // max_total, so that callers nobody listed cannot lock out those the lists name.
  size_t max_unlisted = 512;
  // Whether the lists name `peer`; unset: every caller counts as named. Called on the accept loop's thread.
  std::function<bool(const PeerCredentials&)> listed;
  // A new connection is handed on only once the 24-byte HTTP/2 client preface has arrived; one that has not sent
  // it within this time (gRPC sets no deadline on a socket it adopts) is closed. Zero hands connections on at once.
  std::chrono::milliseconds handshake_timeout{std::chrono::seconds(10)};
  // Pin each admitted connection's process (PeerCredentials::process), for [host] check_caller_process.
  bool pin_peer_process = false;
};

// How many connections the process can keep open, at most `wanted`: on Linux the open-file limit, less what the
// groups keep for their own work.
size_t ConnectionsTheProcessCanHold(size_t wanted);

class AcceptLoop {
 public:
  // Takes ownership of an accepted connection and the credentials of its peer.
  using OnConnection = std::function<void(Connection conn, const PeerCredentials& peer)>;

  AcceptLoop();
  ~AcceptLoop();  // Stop()
  AcceptLoop(const AcceptLoop&) = delete;
  AcceptLoop& operator=(const AcceptLoop&) = delete;

  Status Start(ConnectionLimits limits = {});
  // Stops accepting on every socket and joins the thread. Idempotent.
  void Stop();

  // Starts or stops accepting on a listening socket; safe from any thread. Once Remove returns, `on_connection`
  // is not running and will not be called again for that socket. The socket itself stays the caller's.
  void Add(const ListeningSocket& socket, OnConnection on_connection);
  void Remove(const ListeningSocket& socket);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace csi_proxy::host

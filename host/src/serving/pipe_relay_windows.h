// The byte pump between named-pipe connections and sockets: for each pair it copies what the pipe's client
// sends to the socket and what comes back on the socket to the pipe, until either side ends; then it closes
// both, so the other side sees the end too (a client that hangs up mid-call ends the gRPC connection, and gRPC
// cancels its calls). Runs on an IoPort; one outstanding read per direction, so a slow reader holds back its
// writer (no unbounded buffering).
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <string>

#include "io_port_windows.h"

namespace csi_proxy::host {

class PipeRelay {
 public:
  explicit PipeRelay(IoPort& port) : port_(port) {}
  ~PipeRelay() { CloseAll(); }
  PipeRelay(const PipeRelay&) = delete;
  PipeRelay& operator=(const PipeRelay&) = delete;

  // Relays between a connected pipe handle (already associated with the port) and a connected socket (associated
  // here). `to_socket_first` are bytes already read from the pipe, written to the socket before anything else.
  // `on_closed` runs once, on a port thread, after both are closed.
  Status Add(UniqueHandle pipe, UniqueSocket socket, std::string to_socket_first = {},
             std::function<void()> on_closed = {});

  // Ends every relay and waits until all are closed.
  void CloseAll();
  size_t size() const;

 private:
  struct Link;
  void Finished(Link* link);

  IoPort& port_;
  mutable std::mutex mu_;
  std::condition_variable drained_;
  std::set<Link*> links_;
};

}  // namespace csi_proxy::host

// Serves every registered endpoint: one Unix socket and one gRPC server per endpoint, a byte-level router in
// front of the plugins' handlers, and a worker pool that runs them.
#pragma once

#include <grpcpp/server.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "config.h"
#include "endpoint_registry.h"
#include "host_call.h"
#include "worker_pool.h"

namespace csi_proxy::host {

class RouterService;

class Server {
 public:
  Server(const HostConfig& config, const EndpointRegistry& registry);
  ~Server();

  // Creates the sockets and starts serving. Fails (and cleans up) if any endpoint cannot be served.
  Status Start();

  // Stops accepting, lets calls in flight finish for up to `grace`, cancels the rest, waits until every
  // handler has returned and removes the socket files. After this no call into a plugin is running.
  void Shutdown(std::chrono::milliseconds grace);

  // Paths of the sockets being served, for logging.
  std::vector<std::string> socket_paths() const;

 private:
  struct Listener;
  void AcceptLoop();

  const HostConfig& config_;
  const EndpointRegistry& registry_;
  std::unique_ptr<WorkerPool> pool_;
  std::vector<std::unique_ptr<Listener>> listeners_;
  std::thread accept_thread_;
  int wake_fd_ = -1;
  bool shut_down_ = false;
};

}  // namespace csi_proxy::host

// Serves every registered endpoint: one Unix socket and one gRPC server with a router per endpoint, the accept
// loop in front of them, and the worker pool that runs the plugins' handlers.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "config.h"
#include "endpoint_registry.h"
#include "listeners.h"
#include "worker_pool.h"

namespace csi_proxy::host {

class EndpointServer;
class PoolDispatcher;

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
  const HostConfig& config_;
  const EndpointRegistry& registry_;
  std::unique_ptr<WorkerPool> pool_;
  std::unique_ptr<PoolDispatcher> dispatcher_;
  AcceptLoop accept_loop_;
  std::vector<std::unique_ptr<EndpointServer>> endpoints_;
  bool shut_down_ = false;
};

}  // namespace csi_proxy::host

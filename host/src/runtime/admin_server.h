// The admin socket: a root-only Unix socket ([host] admin_socket; on Windows a pipe only SYSTEM and Administrators
// may open) serving the host's own Admin service (reload, status), for csi-proxyctl and for administrators' tools.
// Never one of the endpoints that drivers reach.
#pragma once

#include <grpcpp/server.h>

#include <functional>
#include <memory>
#include <string>

#include "config/config.h"
#include "runtime/host_runtime.h"
#include "serving/endpoint_socket.h"
#include "serving/listeners.h"

namespace csi_proxy::host {

class AdminServer {
 public:
  // `reload` re-reads the configuration file and applies it (HostRuntime::Reload).
  AdminServer(HostRuntime& runtime, std::string config_path, std::function<ReloadReport()> reload);
  ~AdminServer();

  // Serves on `socket_path` with mode 0600 (AdminSocketAccess). A live socket of another host is refused; a stale one
  // is replaced.
  Status Start(const std::string& socket_path);
  void Stop();

 private:
  class Service;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  AcceptLoop accept_loop_;
  std::unique_ptr<ListeningSocket> socket_;
};

}  // namespace csi_proxy::host

// One endpoint: its socket file, its connections (who connected, their streams), its router, health and reflection
// services, and its gRPC server.
#pragma once

#include <grpcpp/server.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "serving/connection.h"
#include "serving/endpoint_socket.h"
#include "serving/health_service.h"
#include "serving/reflection_service.h"
#include "serving/router.h"
#include "serving/stream_gate.h"

namespace csi_proxy::host {

class EndpointServer {
 public:
  // `streams` counts the streams of every endpoint of the host.
  EndpointServer(std::string path, std::shared_ptr<const EndpointBinding> binding,
                 std::shared_ptr<StreamAccounts> streams);
  ~EndpointServer();
  EndpointServer(const EndpointServer&) = delete;
  EndpointServer& operator=(const EndpointServer&) = delete;

  // Creates the socket (refusing one another process serves) and starts the gRPC server, which closes a
  // connection that has had no call for `idle_timeout` and advertises the streams a connection may open.
  Status Start(const SocketAccess& access, int max_receive_bytes, std::chrono::milliseconds idle_timeout);

  // Hands an accepted connection to gRPC, which owns it from here on.
  void Adopt(Connection conn, const PeerCredentials& peer);

  // New calls go to `binding`; calls already read finish where they started.
  void Rebind(std::shared_ptr<const EndpointBinding> binding);

  // What the health service (grpc.health.v1) answers for "" and each service of the binding: SERVING or
  // NOT_SERVING. An endpoint serves from Start, unless its group instance is not available (an isolated group
  // whose runner failed).
  void SetServing(bool serving);
  std::shared_ptr<const EndpointBinding> binding() const { return router_.binding(); }

  // Closes the listening socket and removes its file, so clients see the endpoint go away. Open connections stay.
  void CloseSocket();

  // Takes no new call (new streams are refused and gRPC sends GOAWAY), ends the health watches, lets calls in
  // flight finish until `deadline`, then cancels (answers) what is left and closes every connection at once: as
  // soon as no call is in flight, it waits for no idle connection.
  void Stop(std::chrono::system_clock::time_point deadline);

  // The listening socket, while it is open (null before Start and after CloseSocket).
  const ListeningSocket* socket() const { return socket_.get(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  StreamGate gate_;
  Router router_;
  ReflectionService reflection_;
  HealthService health_;
  std::mutex health_mu_;
  bool serving_ = true;               // guarded by health_mu_
  std::map<std::string, bool> told_;  // what each service was told (serving); guarded by health_mu_
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<ListeningSocket> socket_;

  void PublishHealth();  // with health_mu_ held
  // Moves the health's watch from one group instance to another (an isolated group can fail on its own).
  void WatchDispatcher(CallDispatcher* before, CallDispatcher* now);
};

}  // namespace csi_proxy::host

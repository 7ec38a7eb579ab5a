// See endpoint_server.h.
#include "serving/endpoint_server.h"

#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/server_builder.h>

namespace csi_proxy::host {

EndpointServer::EndpointServer(std::string path, std::shared_ptr<const EndpointBinding> binding)
    : path_(std::move(path)), router_(std::move(binding), &peers_), reflection_([this] { return router_.binding(); }) {}

EndpointServer::~EndpointServer() {
  CloseSocket();
  Stop(std::chrono::system_clock::now());
}

Status EndpointServer::Start(const SocketAccess& access, int max_receive_bytes,
                             std::chrono::milliseconds idle_timeout) {
  CSI_PROXY_ASSIGN_OR_RETURN(socket_, ListeningSocket::Listen(path_, access));
  // gRPC's own health service (per server, set by SetServing) and reflection; the router's registered methods
  // (the endpoint's methods as of now) and its generic service, which gets every other path.
  static std::once_flag health_enabled;
  std::call_once(health_enabled, [] { grpc::EnableDefaultHealthCheckService(true); });
  grpc::ServerBuilder builder;
  builder.RegisterService(reflection_.v1alpha());
  builder.RegisterService(reflection_.v1());
  builder.RegisterService(router_.methods());
  builder.RegisterCallbackGenericService(router_.generic());
  builder.SetMaxReceiveMessageSize(max_receive_bytes);
  // gRPC's idle filter sends GOAWAY to a connection without calls for this long; clients reconnect when needed.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                             static_cast<int>(std::min<int64_t>(idle_timeout.count(), INT32_MAX)));
  server_ = builder.BuildAndStart();
  if (!server_) return Internal("cannot start the gRPC server for " + path_);
  std::lock_guard lock(health_mu_);
  PublishHealth();
  return Status::Ok();
}

void EndpointServer::Rebind(std::shared_ptr<const EndpointBinding> binding) {
  router_.Bind(std::move(binding));
  std::lock_guard lock(health_mu_);
  PublishHealth();
}

void EndpointServer::SetServing(bool serving) {
  std::lock_guard lock(health_mu_);
  serving_ = serving;
  PublishHealth();
}

void EndpointServer::PublishHealth() {
  grpc::HealthCheckServiceInterface* health = server_ ? server_->GetHealthCheckService() : nullptr;
  if (health == nullptr) return;
  // Watchers hear of changes only. A service a reload took away stays known, as NOT_SERVING.
  std::map<std::string, bool> next;
  for (const auto& [name, serving] : health_) next[name] = false;
  next[""] = serving_;
  for (const auto& name : router_.binding()->endpoint->services) next[name] = serving_;
  for (const auto& [name, serving] : next) {
    auto it = health_.find(name);
    if (it == health_.end() || it->second != serving) health->SetServingStatus(name, serving);
  }
  health_ = std::move(next);
}

void EndpointServer::Adopt(Connection conn, const PeerCredentials& peer) {
  peers_.Set(GrpcPeerName(conn), peer);
  AdoptConnection(*server_, conn);
}

void EndpointServer::CloseSocket() { socket_.reset(); }

void EndpointServer::Stop(std::chrono::system_clock::time_point deadline) {
  std::unique_ptr<grpc::Server> server;
  {
    std::lock_guard lock(health_mu_);  // no health change for a server going away
    server = std::move(server_);
  }
  if (!server) return;
  server->Shutdown(deadline);
  server->Wait();
}

}  // namespace csi_proxy::host

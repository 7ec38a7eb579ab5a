// See endpoint_server.h.
#include "endpoint_server.h"

#include <grpcpp/server_builder.h>
#include <grpcpp/server_posix.h>
#include <unistd.h>

#include "unix_socket.h"

namespace csi_proxy::host {

EndpointServer::EndpointServer(std::string path, std::shared_ptr<const EndpointBinding> binding)
    : path_(std::move(path)), router_(std::move(binding), &peers_) {}

EndpointServer::~EndpointServer() {
  CloseSocket();
  Stop(std::chrono::system_clock::now());
}

Status EndpointServer::Start(uint32_t mode, gid_t group, int max_receive_bytes,
                             std::chrono::milliseconds idle_timeout) {
  CSI_PROXY_ASSIGN_OR_RETURN(fd_, ListenUnixSocket(path_, mode, group));
  grpc::ServerBuilder builder;
  builder.RegisterCallbackGenericService(&router_);
  builder.SetMaxReceiveMessageSize(max_receive_bytes);
  // gRPC's idle filter sends GOAWAY to a connection without calls for this long; clients reconnect when needed.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                             static_cast<int>(std::min<int64_t>(idle_timeout.count(), INT32_MAX)));
  server_ = builder.BuildAndStart();
  if (!server_) return Internal("cannot start the gRPC server for " + path_);
  return Status::Ok();
}

void EndpointServer::Adopt(int conn, const PeerCredentials& peer) {
  peers_.Set(conn, peer);
  grpc::AddInsecureChannelFromFd(server_.get(), conn);
}

void EndpointServer::CloseSocket() {
  if (fd_ < 0) return;
  close(fd_);
  unlink(path_.c_str());
  fd_ = -1;
}

void EndpointServer::Stop(std::chrono::system_clock::time_point deadline) {
  if (!server_) return;
  server_->Shutdown(deadline);
  server_->Wait();
  server_.reset();
}

}  // namespace csi_proxy::host

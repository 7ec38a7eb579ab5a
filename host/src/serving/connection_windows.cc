// See connection.h: on Windows a connection is the server end of the private loopback socket pair its pipe is
// relayed through (listeners_windows.cc), and gRPC adopts it through the shim over its core
// (grpc_socket_adoption_windows.h), under a peer name of our own: "socket:<n>".
#include <spdlog/spdlog.h>

#include "serving/connection.h"
#include "serving/grpc_socket_adoption_windows.h"

namespace csi_proxy::host {

std::string GrpcPeerName(Connection conn) { return "socket:" + std::to_string(conn.handle); }

void AdoptConnection(grpc::Server& server, Connection conn) {
  Status adopted = AdoptServerConnection(server, UniqueSocket(static_cast<SOCKET>(conn.handle)), GrpcPeerName(conn));
  // gRPC owns the socket either way; closing it ends the relay and so the client's pipe.
  if (!adopted.ok()) spdlog::warn("a pipe connection was not served: {}", adopted.message());
}

}  // namespace csi_proxy::host

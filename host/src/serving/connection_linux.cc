// See connection.h: gRPC adopts a connected POSIX socket as a channel of its own.
#include "serving/connection.h"

#include <grpcpp/server_posix.h>

namespace csi_proxy::host {

std::string GrpcPeerName(Connection conn) { return "fd:" + std::to_string(conn.handle); }

void AdoptConnection(grpc::Server& server, Connection conn) {
  grpc::AddInsecureChannelFromFd(&server, static_cast<int>(conn.handle));
}

}  // namespace csi_proxy::host

// A connection the listener accepted, as it hands it to an endpoint's gRPC server (connection_linux.cc: a
// connected Unix socket's fd). On Windows it is the server end of the private loopback socket pair a named pipe
// is relayed through; the serving layer sees the same two functions.
#pragma once

#include <grpcpp/server.h>

#include <cstdint>
#include <string>

namespace csi_proxy::host {

struct Connection {
  intptr_t handle = -1;  // the connected socket's fd on Linux, its SOCKET on Windows
};

// The name gRPC gives the calls of `conn` as their peer (ServerContext::peer()), by which the router finds who
// connected: "fd:<n>" on Linux, "socket:<n>" on Windows.
std::string GrpcPeerName(Connection conn);

// Hands `conn` to `server`, which owns it from then on.
void AdoptConnection(grpc::Server& server, Connection conn);

}  // namespace csi_proxy::host

// The small shim over gRPC's core that lets the named-pipe relay use gRPC at all on Windows: gRPC 1.51 serves
// and dials only what it opens itself there (its POSIX-only AddInsecureChannelFromFd and
// CreateInsecureChannelFromFd have no Windows side, grpc#13447), so these two do for a connected socket what
// those do for a file descriptor, with the same core calls (grpc_server_add_channel_from_fd and
// grpc_channel_create_from_fd in gRPC 1.51's chttp2 code). They use gRPC core internals and are pinned to gRPC
// 1.51.1: the build refuses another version, and tests/windows/pipe_transport_test.cc fails if they stop working.
#pragma once

#include <grpcpp/channel.h>
#include <grpcpp/server.h>
#include <grpcpp/support/channel_arguments.h>

#include <memory>
#include <string>

#include "config/win32_windows.h"
#include "csi_proxy/status.hpp"

namespace csi_proxy::host {

// Serves one HTTP/2 connection on a connected socket through a started server. `peer` is what the server's
// calls see as ServerContext::peer(). gRPC owns the socket from here, also on failure.
Status AdoptServerConnection(grpc::Server& server, UniqueSocket socket, const std::string& peer);

// A channel whose one connection is a connected socket (no reconnection: once the socket ends, calls fail
// UNAVAILABLE). gRPC owns the socket from here.
std::shared_ptr<grpc::Channel> ChannelOverConnection(UniqueSocket socket, const std::string& target,
                                                     const grpc::ChannelArguments& args);

}  // namespace csi_proxy::host

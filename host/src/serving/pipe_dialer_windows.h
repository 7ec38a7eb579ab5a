// The client's side of the named-pipe transport (csi-proxyctl.exe, the Windows tests): dials
// \\.\pipe\<name> and gives a gRPC channel whose one connection runs over it, through the same relay as the
// server's, in reverse.
#pragma once

#include <grpcpp/channel.h>
#include <grpcpp/support/channel_arguments.h>

#include <chrono>
#include <memory>
#include <string>

#include "csi_proxy/status.hpp"

namespace csi_proxy::host {

// UNAVAILABLE when no server has the pipe, or every instance stayed busy for `timeout`; PERMISSION_DENIED when
// the pipe's DACL keeps this process out. The channel does not
// reconnect: once the pipe ends, its calls fail with UNAVAILABLE; dial again for a new connection.
StatusOr<std::shared_ptr<grpc::Channel>> DialPipe(const std::string& name,
                                                  std::chrono::milliseconds timeout = std::chrono::seconds(10),
                                                  const grpc::ChannelArguments& args = {});

}  // namespace csi_proxy::host

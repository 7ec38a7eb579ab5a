// A gRPC client for the Windows tests: any method path with protobuf-lite messages, over \\.\pipe\<name> through
// the project's pipe dialer (what csi-proxyctl.exe uses), the same bytes a Go client over go-winio sends.
#pragma once

#include <google/protobuf/message_lite.h>

#include <chrono>
#include <memory>
#include <string>

#include "grpc_client.h"
#include "pipe_dialer_windows.h"

namespace csi_proxy::testing {

// Calls `method` of the endpoint \\.\pipe\<pipe> with a typed request and parses the typed response; UNAVAILABLE
// when the pipe cannot be dialed.
inline grpc::Status CallPipe(const std::string& pipe, const std::string& method,
                             const google::protobuf::MessageLite& request, google::protobuf::MessageLite* response,
                             std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  auto channel = host::DialPipe(pipe, std::chrono::seconds(10));
  if (!channel.ok()) return grpc::Status(grpc::StatusCode::UNAVAILABLE, channel.status().message());
  return Call(*channel, method, request, response, timeout);
}

}  // namespace csi_proxy::testing

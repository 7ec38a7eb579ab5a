// How csi-proxyctl reaches the host, as the operating system has it: the admin socket and the endpoints as Unix
// sockets on Linux (host_connection_linux.cc), as named pipes on Windows (host_connection_windows.cc), and the host
// program beside csi-proxyctl for check-config.
#pragma once

#include <grpcpp/channel.h>

#include <memory>
#include <string>
#include <vector>

#include "csi_proxy/status.hpp"

namespace csi_proxy::ctl {

// A channel to the admin socket at `path`, once it is known to be there and ours to use; otherwise why not, in
// words for the admin ("it is root-only; run csi-proxyctl as root").
StatusOr<std::shared_ptr<grpc::Channel>> ConnectAdmin(const std::string& path);

// A channel to the endpoint `name` (csi-proxy-<group>-<version>) the host serves in `endpoint_dir`.
StatusOr<std::shared_ptr<grpc::Channel>> ConnectEndpoint(const std::string& endpoint_dir, const std::string& name);

// Runs the host program beside this one (csi-proxy, csi-proxy.exe) with `args` and its own standard streams, and
// gives its exit code (on Linux by becoming it); the reason when it cannot be run.
StatusOr<int> RunHost(const std::string& executable_dir, const std::vector<std::string>& args);

}  // namespace csi_proxy::ctl

// See pipe_dialer_windows.h.
#include "pipe_dialer_windows.h"

#include "grpc_socket_adoption_windows.h"
#include "io_port_windows.h"
#include "loopback_pair_windows.h"
#include "named_pipe_listener_windows.h"
#include "pipe_relay_windows.h"

namespace csi_proxy::host {
namespace {

// One port thread and one relay for all of a client process's pipe connections; they live as long as the
// process (never destroyed, so no connection outlives its relay at exit).
struct ClientRelay {
  IoPort port;
  PipeRelay relay{port};
  Status started = port.Start(1);
};

ClientRelay& Relay() {
  static auto* relay = new ClientRelay;
  return *relay;
}

}  // namespace

StatusOr<std::shared_ptr<grpc::Channel>> DialPipe(const std::string& name, std::chrono::milliseconds timeout,
                                                  const grpc::ChannelArguments& args) {
  ClientRelay& client = Relay();
  CSI_PROXY_RETURN_IF_ERROR(client.started);
  const std::wstring path = PipePath(name);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  UniqueHandle pipe;
  for (;;) {
    // SECURITY_IDENTIFICATION: the server may read who the client is, not act as it.
    pipe.reset(CreateFileW(path.c_str(), GENERIC_READ | GENERIC_WRITE, 0, nullptr, OPEN_EXISTING,
                           FILE_FLAG_OVERLAPPED | SECURITY_SQOS_PRESENT | SECURITY_IDENTIFICATION, nullptr));
    if (pipe.valid()) break;
    DWORD error = GetLastError();
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (error == ERROR_ACCESS_DENIED) {
      return PermissionDenied("cannot open \\\\.\\pipe\\" + name + ": " + ErrorText(error));
    }
    if (error != ERROR_PIPE_BUSY || left.count() <= 0) {
      return Unavailable("cannot open \\\\.\\pipe\\" + name + ": " + ErrorText(error));
    }
    WaitNamedPipeW(path.c_str(), static_cast<DWORD>(left.count()));
  }
  CSI_PROXY_RETURN_IF_ERROR(client.port.Associate(pipe.get()));
  CSI_PROXY_ASSIGN_OR_RETURN(LoopbackPair pair, MakeLoopbackPair());
  CSI_PROXY_RETURN_IF_ERROR(client.relay.Add(std::move(pipe), std::move(pair.accepted)));
  return ChannelOverConnection(std::move(pair.connected), "pipe:" + name, args);
}

}  // namespace csi_proxy::host

// A gRPC server's named-pipe endpoint: accepts on \\.\pipe\<name> (NamedPipeListener), reads who connected
// (IdentifyPipeClient), gives each connection a private loopback socket pair (MakeLoopbackPair) whose one end
// the server takes as an HTTP/2 connection (AdoptServerConnection) and relays bytes between the pipe and the
// other end (PipeRelay). The server's calls see "pipe:<connection number>" as their peer; CallerOf() maps that
// to the identity read when the client connected.
#pragma once

#include <grpcpp/server.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "named_pipe_listener_windows.h"
#include "pipe_client_identity_windows.h"
#include "pipe_relay_windows.h"

namespace csi_proxy::host {

class PipeEndpoint {
 public:
  // Starts accepting for `server` (built and started with no listening port). The port, the relay and the
  // server must outlive the endpoint. Fails as NamedPipeListener::Open does.
  static StatusOr<std::unique_ptr<PipeEndpoint>> Open(IoPort& port, PipeRelay& relay, grpc::Server& server,
                                                      PipeEndpointOptions options);
  ~PipeEndpoint() { Close(); }

  // Stops accepting new connections (those accepted go on until the server or the relay ends them).
  void Close();

  // The identity of the client behind a call's peer ("pipe:<n>"), while its connection lasts.
  std::optional<PipeClientIdentity> CallerOf(const std::string& peer) const;

  size_t connections() const;
  uint64_t refused() const { return refused_.load(); }

 private:
  PipeEndpoint(PipeRelay& relay, grpc::Server& server) : relay_(relay), server_(server) {}
  void Accept(UniqueHandle pipe);

  PipeRelay& relay_;
  grpc::Server& server_;
  std::unique_ptr<NamedPipeListener> listener_;
  std::atomic<uint64_t> next_connection_{1};
  std::atomic<uint64_t> refused_{0};
  // Shared with the relay's close callbacks, which may run after the endpoint is gone.
  struct Callers {
    std::mutex mu;
    std::map<std::string, PipeClientIdentity> by_peer;
  };
  std::shared_ptr<Callers> callers_ = std::make_shared<Callers>();
};

}  // namespace csi_proxy::host

// See pipe_endpoint_windows.h.
#include "pipe_endpoint_windows.h"

#include "grpc_socket_adoption_windows.h"
#include "loopback_pair_windows.h"

namespace csi_proxy::host {

StatusOr<std::unique_ptr<PipeEndpoint>> PipeEndpoint::Open(IoPort& port, PipeRelay& relay, grpc::Server& server,
                                                           PipeEndpointOptions options) {
  std::unique_ptr<PipeEndpoint> endpoint(new PipeEndpoint(relay, server));
  PipeEndpoint* self = endpoint.get();
  CSI_PROXY_ASSIGN_OR_RETURN(
      endpoint->listener_,
      NamedPipeListener::Open(port, std::move(options), [self](UniqueHandle pipe) { self->Accept(std::move(pipe)); }));
  return endpoint;
}

void PipeEndpoint::Close() {
  if (listener_) listener_->Close();
}

void PipeEndpoint::Accept(UniqueHandle pipe) {
  uint64_t connected_at = FileTimeNow();
  auto identity = IdentifyPipeClient(pipe.get(), connected_at);
  if (!identity.ok()) {
    // Nobody to answer for the connection: it is closed unserved.
    refused_.fetch_add(1);
    return;
  }
  auto pair = MakeLoopbackPair();
  if (!pair.ok()) {
    refused_.fetch_add(1);
    return;
  }
  std::string peer = "pipe:" + std::to_string(next_connection_.fetch_add(1));
  {
    std::lock_guard lock(callers_->mu);
    callers_->by_peer[peer] = *identity;
  }
  auto forget = [callers = callers_, peer] {
    std::lock_guard lock(callers->mu);
    callers->by_peer.erase(peer);
  };
  Status relayed = relay_.Add(std::move(pipe), std::move(pair->connected), {}, forget);
  if (!relayed.ok()) {
    forget();
    refused_.fetch_add(1);
    return;
  }
  // From here the relay ends the pipe when gRPC ends the connection, and the other way round.
  Status adopted = AdoptServerConnection(server_, std::move(pair->accepted), peer);
  if (!adopted.ok()) refused_.fetch_add(1);
}

std::optional<PipeClientIdentity> PipeEndpoint::CallerOf(const std::string& peer) const {
  std::lock_guard lock(callers_->mu);
  auto it = callers_->by_peer.find(peer);
  if (it == callers_->by_peer.end()) return std::nullopt;
  return it->second;
}

size_t PipeEndpoint::connections() const {
  std::lock_guard lock(callers_->mu);
  return callers_->by_peer.size();
}

}  // namespace csi_proxy::host

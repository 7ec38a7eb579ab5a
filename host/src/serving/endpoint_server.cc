// See endpoint_server.h.
#include "serving/endpoint_server.h"

#include <grpc/grpc.h>
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/server_builder.h>

#include <thread>

namespace csi_proxy::host {
namespace {

// gRPC 1.51 runs the reactions of every callback server of the process on one pool of threads (on Linux, its
// "nexting" threads), which the last server to shut down joins. A handler still running on one of them (one the
// host borrowed, hung past its deadline) would make that join, and so the stop or the reload that shuts the last
// server down, wait for it. A server that is never shut down keeps the pool for the process's life; it listens on
// nothing.
void KeepCallbackThreadsForTheProcess() {
  static grpc::Server* const keeper = [] {
    static grpc::CallbackGenericService nothing;  // a server without a callback service takes no thread
    grpc::ServerBuilder builder;
    builder.RegisterCallbackGenericService(&nothing);
    return builder.BuildAndStart().release();
  }();
  (void)keeper;
}

}  // namespace

EndpointServer::EndpointServer(std::string path, std::shared_ptr<const EndpointBinding> binding,
                               std::shared_ptr<StreamAccounts> streams)
    : path_(std::move(path)),
      gate_(std::move(streams)),
      router_(std::move(binding), &gate_),
      reflection_(&gate_, [this] { return router_.binding(); }),
      health_(&gate_, [this] { return router_.binding(); }) {
  WatchDispatcher(nullptr, router_.binding()->dispatcher.get());
}

EndpointServer::~EndpointServer() {
  WatchDispatcher(router_.binding()->dispatcher.get(), nullptr);
  CloseSocket();
  Stop(std::chrono::system_clock::now());
}

Status EndpointServer::Start(const SocketAccess& access, int max_receive_bytes,
                             std::chrono::milliseconds idle_timeout) {
  CSI_PROXY_ASSIGN_OR_RETURN(socket_, ListeningSocket::Listen(path_, access));
  KeepCallbackThreadsForTheProcess();
  // The host's health service and reflection; the router's registered methods (the endpoint's methods as of
  // now) and its generic service, which gets every other path. gRPC's own default health service stays off.
  grpc::ServerBuilder builder;
  builder.RegisterService(health_.service());
  builder.RegisterService(reflection_.v1alpha());
  builder.RegisterService(reflection_.v1());
  builder.RegisterService(router_.methods());
  builder.RegisterCallbackGenericService(router_.generic());
  builder.SetMaxReceiveMessageSize(max_receive_bytes);
  // gRPC's idle filter sends GOAWAY to a connection without calls for this long; clients reconnect when needed.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                             static_cast<int>(std::min<int64_t>(idle_timeout.count(), INT32_MAX)));
  // Advertised in each connection's SETTINGS: a gRPC client queues its calls beyond it. gRPC enforces it only
  // once the client acknowledged the SETTINGS; the gate refuses the streams of a client that never does.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             static_cast<int>(gate_.accounts().limits().per_connection));
  server_ = builder.BuildAndStart();
  if (!server_) return Internal("cannot start the gRPC server for " + path_);
  std::lock_guard lock(health_mu_);
  PublishHealth();
  return Status::Ok();
}

void EndpointServer::WatchDispatcher(CallDispatcher* before, CallDispatcher* now) {
  if (before == now) return;
  if (before != nullptr) before->RemoveWatcher(this);
  if (now != nullptr) {
    now->AddWatcher(this, [this] {
      std::lock_guard lock(health_mu_);
      if (server_) PublishHealth();
    });
  }
}

void EndpointServer::Rebind(std::shared_ptr<const EndpointBinding> binding) {
  CallDispatcher* before = router_.binding()->dispatcher.get();
  CallDispatcher* now = binding->dispatcher.get();
  router_.Bind(std::move(binding));
  WatchDispatcher(before, now);
  std::lock_guard lock(health_mu_);
  PublishHealth();
}

void EndpointServer::SetServing(bool serving) {
  std::lock_guard lock(health_mu_);
  serving_ = serving;
  PublishHealth();
}

void EndpointServer::PublishHealth() {
  // A service a reload took away stays known, as NOT_SERVING.
  std::map<std::string, bool> next;
  for (const auto& [name, serving] : told_) next[name] = false;
  auto binding = router_.binding();
  const bool serving = serving_ && binding->dispatcher->Available();
  next[""] = serving;
  for (const auto& name : binding->endpoint->services) next[name] = serving;
  health_.Set(next);
  told_ = std::move(next);
}

void EndpointServer::Adopt(Connection conn, const PeerCredentials& peer) {
  gate_.peers().Set(GrpcPeerName(conn), gate_.accounts().Connect(peer));
  AdoptConnection(*server_, conn);
}

void EndpointServer::CloseSocket() { socket_.reset(); }

void EndpointServer::Stop(std::chrono::system_clock::time_point deadline) {
  std::unique_ptr<grpc::Server> server;
  {
    std::lock_guard lock(health_mu_);  // no health change for a server going away
    server = std::move(server_);
  }
  if (!server) return;
  // gRPC's shutdown sends GOAWAY and waits for the calls and for every connection to go away, which an idle
  // client may take its time to do: it runs beside the wait for the calls in flight, after which whatever is
  // left (idle connections, streams still waiting for their request) is cancelled and closed.
  gate_.Stop();
  health_.EndWatches();
  std::thread shutdown([&] { server->Shutdown(deadline); });
  auto left = deadline - std::chrono::system_clock::now();
  gate_.WaitForCalls(std::chrono::steady_clock::now() +
                     std::chrono::duration_cast<std::chrono::steady_clock::duration>(left));
  grpc_server_cancel_all_calls(server->c_server());
  shutdown.join();
  server->Wait();
}

}  // namespace csi_proxy::host

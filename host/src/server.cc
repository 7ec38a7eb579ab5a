// The serving side of the host; see server.h.
#include "server.h"

#include <grpcpp/server_builder.h>
#include <grpcpp/server_posix.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <thread>

#include "router.h"
#include "unix_socket.h"

namespace csi_proxy::host {

// Runs handlers on the worker pool, so gRPC's threads never block on storage work.
class PoolDispatcher final : public CallDispatcher {
 public:
  explicit PoolDispatcher(WorkerPool* pool) : pool_(pool) {}

  Status Dispatch(const MethodHandler& handler, CallHandle call) override {
    bool queued = pool_->Submit([handler, call = std::move(call)] {
      if (call->IsCancelled()) {
        return call->Complete(static_cast<csi_proxy_status_code>(Code::kDeadlineExceeded),
                              "the call was cancelled or its deadline passed before it started", {});
      }
      const std::string& request = call->request();
      handler.fn(handler.plugin_method_ctx, call.get(), reinterpret_cast<const uint8_t*>(request.data()),
                 request.size());
    });
    if (!queued) return Status(Code::kResourceExhausted, "the host is overloaded; retry later");
    return Status::Ok();
  }

 private:
  WorkerPool* pool_;
};

// One endpoint: its socket file, the peers of its connections, its router and its gRPC server.
class EndpointServer {
 public:
  EndpointServer(const Endpoint* endpoint, std::string path, CallDispatcher* dispatcher)
      : path_(std::move(path)), router_(endpoint, dispatcher, &peers_) {}
  ~EndpointServer() { CloseSocket(); }

  Status Start(uint32_t mode, gid_t group) {
    auto fd = ListenUnixSocket(path_, mode, group);
    if (!fd.ok()) return fd.status();
    fd_ = *fd;
    grpc::ServerBuilder builder;
    builder.RegisterCallbackGenericService(&router_);
    builder.SetMaxReceiveMessageSize(16 * 1024 * 1024);
    server_ = builder.BuildAndStart();
    if (!server_) return Internal("cannot start the gRPC server for " + path_);
    return Status::Ok();
  }

  // Hands an accepted connection to gRPC, which owns the fd from here on.
  void Adopt(int conn, const PeerCredentials& peer) {
    peers_.Set(conn, peer);
    grpc::AddInsecureChannelFromFd(server_.get(), conn);
  }

  // Closes the listening socket and removes its file, so clients see the endpoint go away.
  void CloseSocket() {
    if (fd_ < 0) return;
    close(fd_);
    unlink(path_.c_str());
    fd_ = -1;
  }

  // Waits for calls in flight until `deadline`, then cancels them; returns once every call has been answered.
  void ShutdownServer(std::chrono::system_clock::time_point deadline) {
    if (server_) server_->Shutdown(deadline);
  }
  void Wait() {
    if (server_) server_->Wait();
  }

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  PeerTable peers_;
  Router router_;
  std::unique_ptr<grpc::Server> server_;
  int fd_ = -1;
};

Server::Server(const HostConfig& config, const EndpointRegistry& registry) : config_(config), registry_(registry) {}

Server::~Server() { Shutdown(std::chrono::milliseconds(0)); }

Status Server::Start() {
  CSI_PROXY_ASSIGN_OR_RETURN(gid_t gid, ResolveGroup(config_.socket_group));
  pool_ = std::make_unique<WorkerPool>(config_.workers, static_cast<size_t>(config_.workers) * 256);
  dispatcher_ = std::make_unique<PoolDispatcher>(pool_.get());
  for (const auto& [name, endpoint] : registry_.endpoints()) {
    auto e = std::make_unique<EndpointServer>(&endpoint, config_.endpoint_dir + "/" + name, dispatcher_.get());
    Status started = e->Start(config_.socket_mode, gid);
    endpoints_.push_back(std::move(e));
    if (!started.ok()) {
      Shutdown(std::chrono::milliseconds(0));
      return started;
    }
  }
  CSI_PROXY_RETURN_IF_ERROR(accept_loop_.Start());
  for (auto& e : endpoints_) {
    accept_loop_.Add(e->fd(), [e = e.get()](int conn, const PeerCredentials& peer) { e->Adopt(conn, peer); });
  }
  return Status::Ok();
}

void Server::Shutdown(std::chrono::milliseconds grace) {
  if (shut_down_) return;
  shut_down_ = true;
  accept_loop_.Stop();
  for (auto& e : endpoints_) e->CloseSocket();
  // Each server waits for its calls until the deadline, then cancels them: a cancelled call is answered at once,
  // whatever its handler is doing.
  auto deadline = std::chrono::system_clock::now() + grace;
  std::vector<std::thread> stoppers;
  for (auto& e : endpoints_) stoppers.emplace_back([&e, deadline] { e->ShutdownServer(deadline); });
  for (auto& t : stoppers) t.join();
  if (pool_) pool_->StopAndJoin();  // handlers that were cancelled may still be returning
  for (auto& e : endpoints_) e->Wait();
  endpoints_.clear();
}

std::vector<std::string> Server::socket_paths() const {
  std::vector<std::string> out;
  for (const auto& e : endpoints_) out.push_back(e->path());
  return out;
}

}  // namespace csi_proxy::host

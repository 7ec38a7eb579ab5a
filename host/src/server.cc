// The serving side of the host; see server.h.
#include "server.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/server_posix.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "unix_socket.h"

namespace csi_proxy::host {

// Peer credentials of the connections of one endpoint, by the fd gRPC names them with ("fd:<n>").
class PeerTable {
 public:
  void Set(int fd, PeerCredentials creds) {
    std::lock_guard lock(mu_);
    by_fd_[fd] = creds;
  }
  PeerCredentials Get(const std::string& peer) const {
    if (peer.rfind("fd:", 0) != 0) return {};
    int fd = std::atoi(peer.c_str() + 3);
    std::lock_guard lock(mu_);
    auto it = by_fd_.find(fd);
    return it == by_fd_.end() ? PeerCredentials{} : it->second;
  }

 private:
  mutable std::mutex mu_;
  std::map<int, PeerCredentials> by_fd_;
};

namespace {

// One unary call: read the request, run the handler on the pool, write what the plugin completes with.
class CallReactor final : public grpc::ServerGenericBidiReactor, public csi_proxy_host_call {
 public:
  CallReactor(grpc::GenericCallbackServerContext* ctx, const Endpoint* endpoint, WorkerPool* pool,
              const PeerTable* peers)
      : ctx_(ctx), endpoint_(endpoint), pool_(pool), peers_(peers), started_(std::chrono::steady_clock::now()) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) return FinishOnce(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the call carried no request message"));
    auto it = endpoint_->methods.find(ctx_->method());
    if (it == endpoint_->methods.end()) {
      return FinishOnce(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                                     "unknown method " + ctx_->method() + " on endpoint " + endpoint_->name));
    }
    handler_ = it->second;
    if (!pool_->Submit([this] { Run(); })) {
      FinishOnce(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "the host is overloaded; retry later"));
    }
  }

  void OnCancel() override { cancelled_ = true; }
  void OnDone() override { delete this; }

  // csi_proxy_host_call
  void Complete(csi_proxy_status_code code, std::string_view message, std::string_view response) override {
    if (completed_.exchange(true)) {
      spdlog::error("[{}] {} was completed twice; the second completion is ignored", endpoint_->group, ctx_->method());
      return;
    }
    auto elapsed = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started_);
    if (code == CSI_PROXY_STATUS_OK) {
      spdlog::debug("[{}] {} OK in {} us", endpoint_->group, ctx_->method(), elapsed.count());
      grpc::Slice slice(response.data(), response.size());
      response_ = grpc::ByteBuffer(&slice, 1);
      StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
    } else {
      spdlog::info("[{}] {} failed with {} in {} us: {}", endpoint_->group, ctx_->method(), CodeName(code),
                   elapsed.count(), message);
      Finish(grpc::Status(static_cast<grpc::StatusCode>(code), std::string(message)));
    }
  }
  int64_t DeadlineUnixNs() const override {
    auto deadline = ctx_->deadline();
    if (deadline == std::chrono::system_clock::time_point::max()) return INT64_MAX;
    return std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count();
  }
  bool IsCancelled() const override { return cancelled_ || std::chrono::system_clock::now() > ctx_->deadline(); }
  PeerCredentials Peer() const override { return peers_->Get(ctx_->peer()); }

 private:
  void Run() {
    if (IsCancelled()) {
      return Complete(static_cast<csi_proxy_status_code>(Code::kDeadlineExceeded),
                      "the call was cancelled or its deadline passed before it started", {});
    }
    std::vector<grpc::Slice> slices;
    std::string bytes;
    if (request_.Dump(&slices).ok()) {
      for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
    handler_.fn(handler_.plugin_method_ctx, this, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }

  void FinishOnce(const grpc::Status& status) {
    if (completed_.exchange(true)) return;
    Finish(status);
  }

  grpc::GenericCallbackServerContext* ctx_;
  const Endpoint* endpoint_;
  WorkerPool* pool_;
  const PeerTable* peers_;
  std::chrono::steady_clock::time_point started_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
  MethodHandler handler_;
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> completed_{false};
};

}  // namespace

class RouterService final : public grpc::CallbackGenericService {
 public:
  RouterService(const Endpoint* endpoint, WorkerPool* pool, const PeerTable* peers)
      : endpoint_(endpoint), pool_(pool), peers_(peers) {}
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    return new CallReactor(ctx, endpoint_, pool_, peers_);
  }

 private:
  const Endpoint* endpoint_;
  WorkerPool* pool_;
  const PeerTable* peers_;
};

struct Server::Listener {
  const Endpoint* endpoint = nullptr;
  std::string path;
  int fd = -1;
  PeerTable peers;
  std::unique_ptr<RouterService> service;
  std::unique_ptr<grpc::Server> server;
};

Server::Server(const HostConfig& config, const EndpointRegistry& registry) : config_(config), registry_(registry) {}

Server::~Server() { Shutdown(std::chrono::milliseconds(0)); }

Status Server::Start() {
  CSI_PROXY_ASSIGN_OR_RETURN(auto gid, ResolveGroup(config_.socket_group));
  pool_ = std::make_unique<WorkerPool>(config_.workers, static_cast<size_t>(config_.workers) * 256);

  for (const auto& [name, endpoint] : registry_.endpoints()) {
    auto l = std::make_unique<Listener>();
    l->endpoint = &endpoint;
    l->path = config_.endpoint_dir + "/" + name;
    auto fd = ListenUnixSocket(l->path, config_.socket_mode, gid);
    if (!fd.ok()) {
      Shutdown(std::chrono::milliseconds(0));
      return fd.status();
    }
    l->fd = *fd;
    l->service = std::make_unique<RouterService>(&endpoint, pool_.get(), &l->peers);
    grpc::ServerBuilder builder;
    builder.RegisterCallbackGenericService(l->service.get());
    builder.SetMaxReceiveMessageSize(16 * 1024 * 1024);
    l->server = builder.BuildAndStart();
    listeners_.push_back(std::move(l));
    if (!listeners_.back()->server) {
      Shutdown(std::chrono::milliseconds(0));
      return Internal("cannot start the gRPC server for " + name);
    }
  }
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) return Internal(std::string("eventfd: ") + std::strerror(errno));
  accept_thread_ = std::thread([this] { AcceptLoop(); });
  return Status::Ok();
}

void Server::AcceptLoop() {
  std::vector<pollfd> fds;
  for (const auto& l : listeners_) fds.push_back({l->fd, POLLIN, 0});
  fds.push_back({wake_fd_, POLLIN, 0});
  for (;;) {
    int n = poll(fds.data(), fds.size(), -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      spdlog::error("accept loop: poll failed: {}", std::strerror(errno));
      return;
    }
    if (fds.back().revents != 0) return;  // shutting down
    for (size_t i = 0; i + 1 < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      Listener& l = *listeners_[i];
      for (;;) {
        int conn = accept4(l.fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (conn < 0) break;  // EAGAIN: drained; anything else is logged by the next poll round
        ucred cred{};
        socklen_t len = sizeof cred;
        PeerCredentials peer;
        if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) peer = {cred.pid, cred.uid, cred.gid};
        l.peers.Set(conn, peer);
        grpc::AddInsecureChannelFromFd(l.server.get(), conn);  // gRPC owns the fd from here on
      }
    }
  }
}

void Server::Shutdown(std::chrono::milliseconds grace) {
  if (shut_down_) return;
  shut_down_ = true;
  if (accept_thread_.joinable()) {
    uint64_t one = 1;
    if (write(wake_fd_, &one, sizeof one) < 0) spdlog::warn("cannot wake the accept loop: {}", std::strerror(errno));
    accept_thread_.join();
  }
  if (wake_fd_ >= 0) close(wake_fd_);
  // No new connections: close the listeners and remove the files first, so clients see the endpoint go away.
  for (auto& l : listeners_) {
    if (l->fd >= 0) {
      close(l->fd);
      unlink(l->path.c_str());
      l->fd = -1;
    }
  }
  // Shutdown waits for calls in flight until the deadline, then cancels them; it returns when every reactor
  // has finished, so every handler has completed its call.
  auto deadline = std::chrono::system_clock::now() + grace;
  std::vector<std::thread> stoppers;
  for (auto& l : listeners_) {
    if (l->server) stoppers.emplace_back([&l, deadline] { l->server->Shutdown(deadline); });
  }
  for (auto& t : stoppers) t.join();
  if (pool_) pool_->StopAndJoin();  // handlers that completed asynchronously may still be returning
  for (auto& l : listeners_) {
    if (l->server) l->server->Wait();
  }
  listeners_.clear();
}

std::vector<std::string> Server::socket_paths() const {
  std::vector<std::string> out;
  for (const auto& l : listeners_) out.push_back(l->path);
  return out;
}

}  // namespace csi_proxy::host

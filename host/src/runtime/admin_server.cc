// See admin_server.h.
#include "runtime/admin_server.h"

#include <grpcpp/server_builder.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "csi_proxy/admin/v1/admin.grpc.pb.h"
#include "serving/connection.h"

namespace csi_proxy::host {

namespace admin = csi_proxy::admin::v1;

// A callback service: a synchronous one would start gRPC's sync-server thread, which polls the same epoll set as
// the endpoints' servers, takes their calls' events and hands every completion to gRPC's executor thread (two
// extra thread switches on every call of every endpoint). Status and Descriptors read memory and answer inline;
// a reload, which may wait for a group to drain, runs on a thread of its own.
class AdminServer::Service final : public admin::Admin::CallbackService {
 public:
  Service(HostRuntime& runtime, std::string config_path, std::function<ReloadReport()> reload)
      : runtime_(runtime), config_path_(std::move(config_path)), reload_(std::move(reload)) {}
  ~Service() override { JoinReloads(); }

  grpc::ServerUnaryReactor* Reload(grpc::CallbackServerContext* ctx, const admin::ReloadRequest*,
                                   admin::ReloadResponse* out) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    std::lock_guard lock(mu_);
    ReapReloads();
    auto done = std::make_shared<std::atomic<bool>>(false);
    reloads_.push_back({std::thread([this, reactor, out, done] {
                          spdlog::info("admin request: reloading {}", config_path_);
                          ReloadReport report = reload_();
                          out->set_config_ok(report.config_ok);
                          for (const auto& s : report.applied) out->add_applied(s);
                          for (const auto& s : report.refused) out->add_refused(s);
                          for (const auto& s : report.notes) out->add_notes(s);
                          out->set_took_ms(report.took.count());
                          out->set_summary(report.Summary());
                          reactor->Finish(grpc::Status::OK);
                          done->store(true);
                        }),
                        done});
    return reactor;
  }

  // Waits for the reloads under way (the server has stopped taking calls).
  void JoinReloads() {
    std::lock_guard lock(mu_);
    for (auto& r : reloads_) r.thread.join();
    reloads_.clear();
  }

  grpc::ServerUnaryReactor* Status(grpc::CallbackServerContext* ctx, const admin::StatusRequest*,
                                   admin::StatusResponse* out) override {
    out->set_host_version(CSI_PROXY_HOST_VERSION);
    out->set_config_path(config_path_);
    for (const GroupState& g : runtime_.Describe()) {
      admin::GroupStatus* s = out->add_groups();
      s->set_name(g.name);
      s->set_group(g.group);
      s->set_library(g.library);
      s->set_plugin_version(g.plugin_version);
      s->set_abi_version(g.abi_version);
      for (const auto& e : g.endpoints) s->add_endpoints(e);
      for (const auto& m : g.read_only_methods) s->add_read_only_methods(m);
      s->set_workers(g.limits.workers);
      s->set_max_queued_calls(static_cast<int32_t>(g.limits.max_queued));
      s->set_running(g.usage.executor.running);
      s->set_queued(static_cast<int32_t>(g.usage.executor.queued));
      s->set_in_flight(static_cast<int64_t>(g.usage.in_flight));
      s->set_refused(g.usage.executor.refused);
      s->set_state(g.state);
      s->set_required(g.required);
      s->set_privileges(g.privileges);
      s->set_isolation(g.isolation);
      s->set_runner_pid(g.usage.runner.pid);
      s->set_restarts(g.usage.runner.restarts);
      s->set_last_runner_exit(g.usage.runner.last_exit);
    }
    out->set_endpoint_dir(runtime_.endpoint_dir());
    return Answer(ctx, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* Descriptors(grpc::CallbackServerContext* ctx, const admin::DescriptorsRequest* in,
                                        admin::DescriptorsResponse* out) override {
    auto endpoint = runtime_.FindEndpoint(in->endpoint());
    if (!endpoint.ok()) return Answer(ctx, grpc::Status(grpc::StatusCode::NOT_FOUND, endpoint.status().message()));
    out->set_endpoint(endpoint->name);
    out->set_group(endpoint->group);
    out->set_version(endpoint->version);
    out->set_library(endpoint->library);
    for (const auto& s : endpoint->services) out->add_services(s);
    std::map<std::string, bool> methods;  // sorted by path
    for (const auto& [path, handler] : endpoint->methods) methods[path] = handler.read_only();
    for (const auto& [path, read_only] : methods) {
      admin::MethodInfo* m = out->add_methods();
      m->set_path(path);
      m->set_read_only(read_only);
    }
    for (const auto& f : endpoint->file_descriptors) out->add_file_descriptors(f);
    return Answer(ctx, grpc::Status::OK);
  }

 private:
  struct ReloadThread {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };

  static grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* ctx, const grpc::Status& status) {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(status);
    return reactor;
  }

  // Joins the reload threads that have finished. Caller holds mu_.
  void ReapReloads() {
    std::erase_if(reloads_, [](ReloadThread& r) {
      if (!r.done->load()) return false;
      r.thread.join();
      return true;
    });
  }

  HostRuntime& runtime_;
  const std::string config_path_;
  const std::function<ReloadReport()> reload_;
  std::mutex mu_;
  std::vector<ReloadThread> reloads_;  // guarded by mu_
};

AdminServer::AdminServer(HostRuntime& runtime, std::string config_path, std::function<ReloadReport()> reload)
    : service_(std::make_unique<Service>(runtime, std::move(config_path), std::move(reload))) {}

AdminServer::~AdminServer() { Stop(); }

Status AdminServer::Start(const std::string& socket_path) {
  CSI_PROXY_ASSIGN_OR_RETURN(socket_, ListeningSocket::Listen(socket_path, AdminSocketAccess()));
  grpc::ServerBuilder builder;
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (!server_) return Internal("cannot start the admin server on " + socket_path);
  CSI_PROXY_RETURN_IF_ERROR(accept_loop_.Start());
  accept_loop_.Add(
      *socket_, [server = server_.get()](Connection conn, const PeerCredentials&) { AdoptConnection(*server, conn); });
  return Status::Ok();
}

void AdminServer::Stop() {
  accept_loop_.Stop();
  socket_.reset();
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server_->Wait();
    server_.reset();
  }
  service_->JoinReloads();
}

}  // namespace csi_proxy::host

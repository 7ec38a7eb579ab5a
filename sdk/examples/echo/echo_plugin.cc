// The example API group: what a third party writes to add a group to csi-proxy.
// Two versions share one service layer (here: one function per behaviour); each version only adapts messages.
#include <chrono>
#include <stdexcept>
#include <thread>

#include "csi_proxy/plugin.hpp"
#include "v1/echo.pb.h"
#include "v1alpha1/echo.pb.h"

namespace {

using csi_proxy::Status;
using csi_proxy::sdk::CallContext;

class EchoPlugin : public csi_proxy::sdk::Plugin {
 public:
  Status Init(csi_proxy::sdk::Host& host) override {
    CSI_PROXY_ASSIGN_OR_RETURN(auto greeting, host.config().GetString("greeting", "hello"));
    greeting_ = greeting;
    kubelet_path_ = host.config().kubelet_path();

    host.AddService("v1", "v1.Echo")
        .Unary<v1::EchoRequest, v1::EchoResponse>("Echo",
                                                  [](const v1::EchoRequest& req, v1::EchoResponse& resp, CallContext&) {
                                                    if (req.throw_exception())
                                                      throw std::runtime_error("asked to throw");
                                                    if (req.fail_with_code() != 0)
                                                      return Status(static_cast<csi_proxy::Code>(req.fail_with_code()),
                                                                    req.text());
                                                    resp.set_text(req.text());
                                                    return Status::Ok();
                                                  })
        .AsyncUnary<v1::EchoRequest, v1::EchoResponse>(
            "EchoLater",
            [](v1::EchoRequest req, csi_proxy::sdk::Responder<v1::EchoResponse> responder) {
              // Completes from a thread of the plugin's own, after the handler has returned.
              std::thread([req = std::move(req), r = std::move(responder)]() mutable {
                std::this_thread::sleep_for(std::chrono::milliseconds(req.delay_ms()));
                v1::EchoResponse resp;
                resp.set_text(req.text());
                r.Finish(Status::Ok(), resp);
              }).detach();
            })
        .Unary<v1::EchoRequest, v1::EchoResponse>(
            "Sleep",
            [](const v1::EchoRequest& req, v1::EchoResponse& resp, CallContext& ctx) {
              auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(req.delay_ms());
              while (std::chrono::steady_clock::now() < until) {
                if (ctx.IsCancelled()) {
                  resp.set_saw_cancellation(true);
                  break;
                }
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
              }
              resp.set_text(req.text());
              return Status::Ok();
            })
        .Unary<v1::WhoAmIRequest, v1::WhoAmIResponse>(
            "WhoAmI", [this](const v1::WhoAmIRequest&, v1::WhoAmIResponse& resp, CallContext& ctx) {
              auto peer = ctx.peer();
              resp.set_pid(peer.pid);
              resp.set_uid(peer.uid);
              resp.set_gid(peer.gid);
              resp.set_greeting(greeting_);
              resp.set_kubelet_path(kubelet_path_);
              auto deadline = ctx.deadline();
              if (deadline != std::chrono::system_clock::time_point::max()) {
                resp.set_deadline_unix_ns(
                    std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count());
              }
              return Status::Ok();
            });

    host.AddService("v1alpha1", "v1alpha1.Echo")
        .Unary<v1alpha1::EchoRequest, v1alpha1::EchoResponse>(
            "Echo", [](const v1alpha1::EchoRequest& req, v1alpha1::EchoResponse& resp, CallContext&) {
              resp.set_text(req.text());
              return Status::Ok();
            });
    csi_proxy::sdk::LogInfo("echo group ready, greeting '" + greeting_ + "'");
    return Status::Ok();
  }

 private:
  std::string greeting_;
  std::string kubelet_path_;
};

}  // namespace

#ifndef ECHO_GROUP_NAME
#define ECHO_GROUP_NAME "echo"
#endif
CSI_PROXY_PLUGIN(EchoPlugin, ECHO_GROUP_NAME, "1.0.0")

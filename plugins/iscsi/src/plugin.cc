// The iSCSI group library: reads the group's keys, opens the state directory and serves
// csi-proxy-iscsi-v1alpha2 and csi-proxy-iscsi-v1alpha1. Each version only adapts its messages to the one
// IscsiService; the two share their message shapes (v1alpha1 lacks SetMutualChapSecret), so one template
// registers both.
#include <memory>
#include <optional>
#include <string>

#include "csi_proxy/plugin.hpp"
#include "iscsi_backend_linux.h"
#include "iscsi_service.h"
#include "v1alpha1/iscsi.pb.h"
#include "v1alpha2/iscsi.pb.h"

namespace csi_proxy::iscsi {
namespace {

using sdk::CallContext;

template <typename Request>
OptionalPortal PortalOf(const Request& req) {
  if (!req.has_target_portal()) return std::nullopt;
  return PortalRequest{req.target_portal().target_address(), req.target_portal().target_port()};
}

// The methods both versions have; `Api` is the version's proto namespace wrapped in a type.
template <typename Api>
sdk::ServiceBuilder& AddCommonMethods(sdk::ServiceBuilder& svc, IscsiService& iscsi) {
  using AddReq = typename Api::AddTargetPortalRequest;
  using DiscoverReq = typename Api::DiscoverTargetPortalRequest;
  using RemoveReq = typename Api::RemoveTargetPortalRequest;
  using ListReq = typename Api::ListTargetPortalsRequest;
  using ConnectReq = typename Api::ConnectTargetRequest;
  using DisconnectReq = typename Api::DisconnectTargetRequest;
  using DisksReq = typename Api::GetTargetDisksRequest;

  svc.template Unary<AddReq, typename Api::AddTargetPortalResponse>(
         "AddTargetPortal",
         [&iscsi](const AddReq& req, auto&, CallContext&) { return iscsi.AddTargetPortal(PortalOf(req)); })
      .template Unary<DiscoverReq, typename Api::DiscoverTargetPortalResponse>(
          "DiscoverTargetPortal",
          [&iscsi](const DiscoverReq& req, auto& resp, CallContext&) {
            auto iqns = iscsi.DiscoverTargetPortal(PortalOf(req));
            if (!iqns.ok()) return iqns.status();
            for (const auto& iqn : *iqns) resp.add_iqns(iqn);
            return Status::Ok();
          })
      .template Unary<RemoveReq, typename Api::RemoveTargetPortalResponse>(
          "RemoveTargetPortal",
          [&iscsi](const RemoveReq& req, auto&, CallContext&) { return iscsi.RemoveTargetPortal(PortalOf(req)); })
      .template Unary<ListReq, typename Api::ListTargetPortalsResponse>(
          "ListTargetPortals",
          [&iscsi](const ListReq&, auto& resp, CallContext&) {
            for (const auto& portal : iscsi.ListTargetPortals()) {
              auto* out = resp.add_target_portals();
              out->set_target_address(portal.address);
              out->set_target_port(portal.port);
            }
            return Status::Ok();
          })
      .template Unary<ConnectReq, typename Api::ConnectTargetResponse>(
          "ConnectTarget",
          [&iscsi](const ConnectReq& req, auto&, CallContext&) {
            return iscsi.ConnectTarget({PortalOf(req), req.iqn(), static_cast<int32_t>(req.auth_type()),
                                        req.chap_username(), req.chap_secret()});
          })
      .template Unary<DisconnectReq, typename Api::DisconnectTargetResponse>(
          "DisconnectTarget", [&iscsi](const DisconnectReq& req, auto&,
                                       CallContext&) { return iscsi.DisconnectTarget(PortalOf(req), req.iqn()); })
      .template Unary<DisksReq, typename Api::GetTargetDisksResponse>(
          "GetTargetDisks", [&iscsi](const DisksReq& req, auto& resp, CallContext&) {
            auto disks = iscsi.GetTargetDisks(PortalOf(req), req.iqn());
            if (!disks.ok()) return disks.status();
            for (const auto& id : *disks) resp.add_diskids(id);
            return Status::Ok();
          });
  return svc;
}

#define CSI_PROXY_ISCSI_MESSAGES(ns)                                       \
  struct ns##Messages {                                                    \
    using AddTargetPortalRequest = ns::AddTargetPortalRequest;             \
    using AddTargetPortalResponse = ns::AddTargetPortalResponse;           \
    using DiscoverTargetPortalRequest = ns::DiscoverTargetPortalRequest;   \
    using DiscoverTargetPortalResponse = ns::DiscoverTargetPortalResponse; \
    using RemoveTargetPortalRequest = ns::RemoveTargetPortalRequest;       \
    using RemoveTargetPortalResponse = ns::RemoveTargetPortalResponse;     \
    using ListTargetPortalsRequest = ns::ListTargetPortalsRequest;         \
    using ListTargetPortalsResponse = ns::ListTargetPortalsResponse;       \
    using ConnectTargetRequest = ns::ConnectTargetRequest;                 \
    using ConnectTargetResponse = ns::ConnectTargetResponse;               \
    using DisconnectTargetRequest = ns::DisconnectTargetRequest;           \
    using DisconnectTargetResponse = ns::DisconnectTargetResponse;         \
    using GetTargetDisksRequest = ns::GetTargetDisksRequest;               \
    using GetTargetDisksResponse = ns::GetTargetDisksResponse;             \
  };
CSI_PROXY_ISCSI_MESSAGES(v1alpha1)
CSI_PROXY_ISCSI_MESSAGES(v1alpha2)
#undef CSI_PROXY_ISCSI_MESSAGES

StatusOr<std::chrono::milliseconds> Seconds(const sdk::PluginConfig& config, const char* key, int64_t fallback) {
  auto value = config.GetInt(key, fallback);
  if (!value.ok()) return value.status();
  if (*value < 1 || *value > 3600) return InvalidArgument(std::string("group key '") + key + "' must be 1..3600");
  return std::chrono::milliseconds(*value * 1000);
}

class IscsiPlugin : public sdk::Plugin {
 public:
  Status Init(sdk::Host& host) override {
    const sdk::PluginConfig& config = host.config();
    CSI_PROXY_RETURN_IF_ERROR(
        config.RequireKnownKeys({"state_dir", "initiator_name", "node_db_dir", "mutual_chap_username",
                                 "discovery_timeout_seconds", "login_timeout_seconds"}));
    LinuxIscsiOptions options;
    auto state_dir = config.GetString("state_dir", config.state_dir() + "/iscsi");
    auto initiator_name = config.GetString("initiator_name", "");
    auto node_db_dir = config.GetString("node_db_dir", options.node_db_dir);
    auto mutual_user = config.GetString("mutual_chap_username", "");
    auto discovery_timeout = Seconds(config, "discovery_timeout_seconds", 15);
    auto login_timeout = Seconds(config, "login_timeout_seconds", 120);
    for (const Status* s : {&state_dir.status(), &initiator_name.status(), &node_db_dir.status(), &mutual_user.status(),
                            &discovery_timeout.status(), &login_timeout.status()}) {
      if (!s->ok()) return s->WithContext("iscsi group");
    }
    options.state_dir = *state_dir;
    options.initiator_name = *initiator_name;
    options.node_db_dir = *node_db_dir;
    options.mutual_chap_username = *mutual_user;
    options.discovery_timeout = *discovery_timeout;
    options.login_timeout = *login_timeout;
    options.log = sdk::HostLogSink();
    auto backend = MakeLinuxIscsiBackend(options);
    if (!backend.ok()) return backend.status().WithContext("iscsi group");
    service_ = std::make_unique<IscsiService>(std::move(*backend), sdk::HostLogSink());

    AddCommonMethods<v1alpha1Messages>(host.AddService("v1alpha1", "v1alpha1.Iscsi"), *service_);
    AddCommonMethods<v1alpha2Messages>(host.AddService("v1alpha2", "v1alpha2.Iscsi"), *service_)
        .template Unary<v1alpha2::SetMutualChapSecretRequest, v1alpha2::SetMutualChapSecretResponse>(
            "SetMutualChapSecret", [this](const v1alpha2::SetMutualChapSecretRequest& req, auto&, CallContext&) {
              return service_->SetMutualChapSecret(req.mutualchapsecret());
            });
    sdk::LogInfo("iscsi group ready; state in " + options.state_dir + ", initiator name from " +
                 (options.initiator_name.empty() ? options.initiator_name_file : std::string("the configuration")));
    return Status::Ok();
  }

 private:
  std::unique_ptr<IscsiService> service_;
};

}  // namespace
}  // namespace csi_proxy::iscsi

CSI_PROXY_PLUGIN(csi_proxy::iscsi::IscsiPlugin, "iscsi", "0.1.0")

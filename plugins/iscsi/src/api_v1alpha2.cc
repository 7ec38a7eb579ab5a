// v1alpha1 and v1alpha2 of the iSCSI group: one message shape, one template; v1alpha2 adds SetMutualChapSecret.
#include <optional>

#include "api.h"
#include "v1alpha1/iscsi.csi.h"
#include "v1alpha2/iscsi.csi.h"

namespace csi_proxy::iscsi {
namespace {

using sdk::CallContext;

template <typename Request>
OptionalPortal PortalOf(const Request& req) {
  if (!req.has_target_portal()) return std::nullopt;
  return PortalRequest{req.target_portal().target_address(), req.target_portal().target_port()};
}

template <typename Api>
sdk::ServiceBuilder& AddMethods(sdk::Host& host, IscsiService& iscsi) {
  return host.AddService<Api>()
      .template Unary<typename Api::AddTargetPortal>(
          [&iscsi](const auto& req, auto&, CallContext&) { return iscsi.AddTargetPortal(PortalOf(req)); })
      .template Unary<typename Api::DiscoverTargetPortal>([&iscsi](const auto& req, auto& resp, CallContext&) {
        CSI_PROXY_ASSIGN_OR_RETURN(auto iqns, iscsi.DiscoverTargetPortal(PortalOf(req)));
        for (const auto& iqn : iqns) resp.add_iqns(iqn);
        return Status::Ok();
      })
      .template Unary<typename Api::RemoveTargetPortal>(
          [&iscsi](const auto& req, auto&, CallContext&) { return iscsi.RemoveTargetPortal(PortalOf(req)); })
      .template Unary<typename Api::ListTargetPortals>(
          [&iscsi](const auto&, auto& resp, CallContext&) {
            for (const auto& portal : iscsi.ListTargetPortals()) {
              auto* out = resp.add_target_portals();
              out->set_target_address(portal.address);
              out->set_target_port(portal.port);
            }
            return Status::Ok();
          },
          sdk::kReadOnly | sdk::kNonBlocking)  // from memory: the portals as last written (state_store_linux.h)
      .template Unary<typename Api::ConnectTarget>([&iscsi](const auto& req, auto&, CallContext&) {
        return iscsi.ConnectTarget(
            {PortalOf(req), req.iqn(), static_cast<int32_t>(req.auth_type()), req.chap_username(), req.chap_secret()});
      })
      .template Unary<typename Api::DisconnectTarget>(
          [&iscsi](const auto& req, auto&, CallContext&) { return iscsi.DisconnectTarget(PortalOf(req), req.iqn()); })
      .template Unary<typename Api::GetTargetDisks>(
          [&iscsi](const auto& req, auto& resp, CallContext&) {
            CSI_PROXY_ASSIGN_OR_RETURN(auto disks, iscsi.GetTargetDisks(PortalOf(req), req.iqn()));
            for (const auto& id : disks) resp.add_diskids(id);
            return Status::Ok();
          },
          sdk::kReadOnly);
}

}  // namespace

void AddApiVersions(sdk::Host& host, IscsiService& iscsi) {
  AddMethods<v1alpha1::IscsiApi>(host, iscsi);
  AddMethods<v1alpha2::IscsiApi>(host, iscsi)
      .Unary<v1alpha2::IscsiApi::SetMutualChapSecret>(
          [&iscsi](const auto& req, auto&, CallContext&) { return iscsi.SetMutualChapSecret(req.mutualchapsecret()); });
}

}  // namespace csi_proxy::iscsi

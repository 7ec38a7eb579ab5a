// v1alpha1.System: message adaptation only; validation and behaviour live in SystemService.
#include "api.h"

#include <chrono>

#include "v1alpha1/system.csi.h"

namespace csi_proxy::system {
namespace {

// The call's deadline on the steady clock the service layer waits with, and the host's cancellation check.
WaitLimits LimitsOf(const sdk::CallContext& ctx) {
  WaitLimits limits;
  auto deadline = ctx.deadline();
  if (deadline != std::chrono::system_clock::time_point::max()) {
    auto left = deadline - std::chrono::system_clock::now();
    limits.deadline =
        std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(left);
  }
  limits.cancelled = [&ctx] { return ctx.IsCancelled(); };
  return limits;
}

// The enums share upstream's numbering by construction (system_backend.h), so a cast is exact.
v1alpha1::StartType ToProto(StartType t) { return static_cast<v1alpha1::StartType>(t); }
v1alpha1::ServiceStatus ToProto(ServiceStatus s) { return static_cast<v1alpha1::ServiceStatus>(s); }

}  // namespace

void AddApiVersions(sdk::Host& host, SystemService& service) {
  using Api = v1alpha1::SystemApi;
  using sdk::CallContext;
  host.AddService<Api>()
      .Unary<Api::GetBIOSSerialNumber>(
          [&service](const auto&, auto& resp, CallContext&) {
            CSI_PROXY_ASSIGN_OR_RETURN(std::string serial, service.GetBiosSerialNumber());
            resp.set_serial_number(serial);
            return Status::Ok();
          },
          sdk::kReadOnly)
      .Unary<Api::GetService>(
          [&service](const auto& req, auto& resp, CallContext&) {
            CSI_PROXY_ASSIGN_OR_RETURN(ServiceInfo info, service.GetService(req.name()));
            resp.set_display_name(info.display_name);
            resp.set_start_type(ToProto(info.start_type));
            resp.set_status(ToProto(info.status));
            return Status::Ok();
          },
          sdk::kReadOnly)
      .Unary<Api::StartService>([&service](const auto& req, auto&, CallContext& ctx) {
        return service.StartService(req.name(), LimitsOf(ctx));
      })
      .Unary<Api::StopService>([&service](const auto& req, auto&, CallContext& ctx) {
        return service.StopService(req.name(), req.force(), LimitsOf(ctx));
      });
}

}  // namespace csi_proxy::system

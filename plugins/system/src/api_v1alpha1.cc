// v1alpha1.System: message adaptation only; validation and behaviour live in SystemService.
#include "api_v1alpha1.h"

#include <chrono>

#include "v1alpha1/system.pb.h"

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

void AddSystemV1alpha1(sdk::ServiceBuilder& svc, SystemService& service) {
  using sdk::CallContext;
  svc.Unary<v1alpha1::GetBIOSSerialNumberRequest, v1alpha1::GetBIOSSerialNumberResponse>(
         "GetBIOSSerialNumber",
         [&service](const v1alpha1::GetBIOSSerialNumberRequest&, v1alpha1::GetBIOSSerialNumberResponse& resp,
                    CallContext&) {
           auto serial = service.GetBiosSerialNumber();
           if (serial.ok()) resp.set_serial_number(*serial);
           return serial.status();
         })
      .Unary<v1alpha1::GetServiceRequest, v1alpha1::GetServiceResponse>(
          "GetService",
          [&service](const v1alpha1::GetServiceRequest& req, v1alpha1::GetServiceResponse& resp, CallContext&) {
            CSI_PROXY_ASSIGN_OR_RETURN(auto info, service.GetService(req.name()));
            resp.set_display_name(info.display_name);
            resp.set_start_type(ToProto(info.start_type));
            resp.set_status(ToProto(info.status));
            return Status::Ok();
          })
      .Unary<v1alpha1::StartServiceRequest, v1alpha1::StartServiceResponse>(
          "StartService", [&service](const v1alpha1::StartServiceRequest& req, v1alpha1::StartServiceResponse&,
                                     CallContext& ctx) { return service.StartService(req.name(), LimitsOf(ctx)); })
      .Unary<v1alpha1::StopServiceRequest, v1alpha1::StopServiceResponse>(
          "StopService",
          [&service](const v1alpha1::StopServiceRequest& req, v1alpha1::StopServiceResponse&, CallContext& ctx) {
            return service.StopService(req.name(), req.force(), LimitsOf(ctx));
          });
}

}  // namespace csi_proxy::system

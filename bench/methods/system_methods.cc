// Read-only methods of the system group (v1alpha1): the BIOS serial number and a service's state.
#include "method_bench.h"
#include "v1alpha1/system.pb.h"

int main(int argc, char** argv) {
  using csi_proxy::bench::MethodCase;
  using csi_proxy::bench::MethodFixture;
  using csi_proxy::bench::ParsesAs;
  std::vector<MethodCase> cases = {
      {"csi-proxy-system-v1alpha1", "/v1alpha1.System/GetBIOSSerialNumber",
       [](const MethodFixture&) { return v1alpha1::GetBIOSSerialNumberRequest().SerializeAsString(); },
       ParsesAs<v1alpha1::GetBIOSSerialNumberResponse>()},
      {"csi-proxy-system-v1alpha1", "/v1alpha1.System/GetService",
       [](const MethodFixture&) {
         v1alpha1::GetServiceRequest req;
         req.set_name("systemd-journald");  // present wherever systemd is
         return req.SerializeAsString();
       },
       ParsesAs<v1alpha1::GetServiceResponse>()},
  };
  return csi_proxy::bench::RunMethodBenchmarks(argc, argv, "system", cases);
}

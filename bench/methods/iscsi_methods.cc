// Read-only methods of the iSCSI group (v1alpha2): the target portals it remembers (none here).
#include "method_bench.h"
#include "v1alpha2/iscsi.pb.h"

int main(int argc, char** argv) {
  using csi_proxy::bench::MethodCase;
  using csi_proxy::bench::MethodFixture;
  using csi_proxy::bench::ParsesAs;
  std::vector<MethodCase> cases = {
      {"csi-proxy-iscsi-v1alpha2", "/v1alpha2.Iscsi/ListTargetPortals",
       [](const MethodFixture&) { return v1alpha2::ListTargetPortalsRequest().SerializeAsString(); },
       ParsesAs<v1alpha2::ListTargetPortalsResponse>()},
  };
  return csi_proxy::bench::RunMethodBenchmarks(argc, argv, "iscsi", cases);
}

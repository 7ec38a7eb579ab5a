// Read-only methods of the disk group (v1): the disk listings walk every disk, so they grow with the disks.
#include <algorithm>

#include "method_bench.h"
#include "v1/disk.pb.h"

namespace {

using csi_proxy::bench::MethodCase;
using csi_proxy::bench::MethodFixture;
using csi_proxy::bench::ParsesAs;

template <typename Req>
std::string DiskRequest(uint64_t disk_number) {
  Req req;
  req.set_disk_number(static_cast<uint32_t>(disk_number));
  return req.SerializeAsString();
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<MethodCase> cases = {
      {"csi-proxy-disk-v1", "/v1.Disk/ListDiskLocations",
       [](const MethodFixture&) { return v1::ListDiskLocationsRequest().SerializeAsString(); },
       ParsesAs<v1::ListDiskLocationsResponse>()},  // loop devices have no SCSI address: they are not listed
      {"csi-proxy-disk-v1", "/v1.Disk/ListDiskIDs",
       [](const MethodFixture&) { return v1::ListDiskIDsRequest().SerializeAsString(); },
       ParsesAs<v1::ListDiskIDsResponse>([](const v1::ListDiskIDsResponse& r, const MethodFixture& f) {
         for (uint64_t n : f.disk_numbers) {
           if (!r.diskids().contains(static_cast<uint32_t>(n))) return "does not list disk " + std::to_string(n);
         }
         return std::string();
       })},
      {"csi-proxy-disk-v1", "/v1.Disk/GetDiskStats",
       [](const MethodFixture& f) { return DiskRequest<v1::GetDiskStatsRequest>(f.disk_numbers.front()); },
       ParsesAs<v1::GetDiskStatsResponse>([](const v1::GetDiskStatsResponse& r, const MethodFixture&) {
         return r.total_bytes() == (64ll << 20)
                    ? ""
                    : "reports " + std::to_string(r.total_bytes()) + " bytes for a 64 MiB disk";
       })},
      {"csi-proxy-disk-v1", "/v1.Disk/GetDiskState",
       [](const MethodFixture& f) { return DiskRequest<v1::GetDiskStateRequest>(f.disk_numbers.front()); },
       ParsesAs<v1::GetDiskStateResponse>([](const v1::GetDiskStateResponse& r, const MethodFixture&) {
         return r.is_online() ? "" : "says an attached disk is offline";
       })},
  };
  csi_proxy::bench::MethodBenchOptions options;
  options.trivial_baseline = true;  // issue 12: each method's p50 against PathExists through the same host
  return csi_proxy::bench::RunMethodBenchmarks(argc, argv, "disk", cases, options);
}

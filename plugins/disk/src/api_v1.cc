// v1 and v1beta3 of the disk group: one message shape (disks by uint32 number), one template.
#include "api.h"
#include "v1/disk.csi.h"
#include "v1beta3/disk.csi.h"

namespace csi_proxy::disk {
namespace {

using sdk::CallContext;

template <typename Api>
void AddV1Methods(sdk::Host& host, DiskService& disks) {
  host.AddService<Api>()
      .template Unary<typename Api::ListDiskLocations>(
          [&disks](const auto&, auto& resp, CallContext&) {
            return ListLocations(disks, resp, [](uint32_t n) { return n; });
          },
          sdk::kReadOnly)
      .template Unary<typename Api::PartitionDisk>(
          [&disks](const auto& req, auto&, CallContext&) { return disks.PartitionDisk(req.disk_number()); })
      .template Unary<typename Api::Rescan>([&disks](const auto&, auto&, CallContext&) { return disks.Rescan(); })
      .template Unary<typename Api::ListDiskIDs>(
          [&disks](const auto&, auto& resp, CallContext&) {
            CSI_PROXY_ASSIGN_OR_RETURN(auto ids, disks.ListDiskIds());
            for (const auto& [number, id] : ids) {
              auto& out = (*resp.mutable_diskids())[number];
              out.set_page83(id.page83);
              out.set_serial_number(id.serial_number);
            }
            return Status::Ok();
          },
          sdk::kReadOnly)
      .template Unary<typename Api::GetDiskStats>(
          [&disks](const auto& req, auto& resp, CallContext&) {
            CSI_PROXY_ASSIGN_OR_RETURN(int64_t size, disks.GetDiskStats(req.disk_number()));
            resp.set_total_bytes(size);
            return Status::Ok();
          },
          sdk::kReadOnly)
      .template Unary<typename Api::SetDiskState>([&disks](const auto& req, auto&, CallContext&) {
        return disks.SetDiskState(req.disk_number(), req.is_online());
      })
      .template Unary<typename Api::GetDiskState>(
          [&disks](const auto& req, auto& resp, CallContext&) {
            CSI_PROXY_ASSIGN_OR_RETURN(bool online, disks.GetDiskState(req.disk_number()));
            resp.set_is_online(online);
            return Status::Ok();
          },
          sdk::kReadOnly);
}

}  // namespace

void AddVersionsShapedLikeV1(sdk::Host& host, DiskService& disks) {
  AddV1Methods<v1::DiskApi>(host, disks);
  AddV1Methods<v1beta3::DiskApi>(host, disks);
}

void AddApiVersions(sdk::Host& host, DiskService& disks) {
  AddVersionsShapedLikeV1(host, disks);
  AddVersionsShapedLikeV1alpha1(host, disks);
}

}  // namespace csi_proxy::disk

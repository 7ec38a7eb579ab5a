// v1beta2, v1beta1 and v1alpha1 of the disk group: disks named by decimal strings ("3"). All three share
// ListDiskLocations, PartitionDisk and Rescan; v1beta1 and v1beta2 add ListDiskIDs and DiskStats, v1beta2 adds
// SetAttachState and GetAttachState, v1alpha1 adds GetDiskNumberByName.
#include <string>

#include "api.h"
#include "v1alpha1/disk.csi.h"
#include "v1beta1/disk.csi.h"
#include "v1beta2/disk.csi.h"

namespace csi_proxy::disk {
namespace {

using sdk::CallContext;

std::string DiskKey(uint32_t number) { return std::to_string(number); }

template <typename Api>
sdk::ServiceBuilder& AddBasics(sdk::Host& host, DiskService& disks) {
  return host.AddService<Api>()
      .template Unary<typename Api::ListDiskLocations>(
          [&disks](const auto&, auto& resp, CallContext&) { return ListLocations(disks, resp, DiskKey); },
          sdk::kReadOnly)
      .template Unary<typename Api::PartitionDisk>([&disks](const auto& req, auto&, CallContext&) {
        CSI_PROXY_ASSIGN_OR_RETURN(uint32_t number, DiskService::ParseDiskId(req.diskid()));
        return disks.PartitionDisk(number);
      })
      .template Unary<typename Api::Rescan>([&disks](const auto&, auto&, CallContext&) { return disks.Rescan(); });
}

template <typename Api>
sdk::ServiceBuilder& AddIdsAndStats(sdk::ServiceBuilder& svc, DiskService& disks) {
  return svc
      .template Unary<typename Api::ListDiskIDs>(
          [&disks](const auto&, auto& resp, CallContext&) {
            CSI_PROXY_ASSIGN_OR_RETURN(auto ids, disks.ListDiskIds());
            for (const auto& [number, id] : ids) {
              auto& identifiers = *(*resp.mutable_diskids())[DiskKey(number)].mutable_identifiers();
              identifiers["page83"] = id.page83;
              identifiers["serialNumber"] = id.serial_number;
            }
            return Status::Ok();
          },
          sdk::kReadOnly)
      .template Unary<typename Api::DiskStats>(
          [&disks](const auto& req, auto& resp, CallContext&) {
            CSI_PROXY_ASSIGN_OR_RETURN(uint32_t number, DiskService::ParseDiskId(req.diskid()));
            CSI_PROXY_ASSIGN_OR_RETURN(int64_t size, disks.GetDiskStats(number));
            resp.set_disksize(size);
            return Status::Ok();
          },
          sdk::kReadOnly);
}

}  // namespace

void AddVersionsShapedLikeV1alpha1(sdk::Host& host, DiskService& disks) {
  using V1beta2 = v1beta2::DiskApi;
  AddIdsAndStats<V1beta2>(AddBasics<V1beta2>(host, disks), disks)
      .Unary<V1beta2::SetAttachState>([&disks](const auto& req, auto&, CallContext&) {
        CSI_PROXY_ASSIGN_OR_RETURN(uint32_t number, DiskService::ParseDiskId(req.diskid()));
        return disks.SetDiskState(number, req.isonline());
      })
      .Unary<V1beta2::GetAttachState>(
          [&disks](const auto& req, auto& resp, CallContext&) {
            CSI_PROXY_ASSIGN_OR_RETURN(uint32_t number, DiskService::ParseDiskId(req.diskid()));
            CSI_PROXY_ASSIGN_OR_RETURN(bool online, disks.GetDiskState(number));
            resp.set_isonline(online);
            return Status::Ok();
          },
          sdk::kReadOnly);

  AddIdsAndStats<v1beta1::DiskApi>(AddBasics<v1beta1::DiskApi>(host, disks), disks);

  using V1alpha1 = v1alpha1::DiskApi;
  AddBasics<V1alpha1>(host, disks)
      .Unary<V1alpha1::GetDiskNumberByName>(
          [&disks](const auto& req, auto& resp, CallContext&) {
            CSI_PROXY_ASSIGN_OR_RETURN(uint32_t number, disks.GetDiskNumberByName(req.disk_name()));
            resp.set_disk_number(DiskKey(number));
            return Status::Ok();
          },
          sdk::kReadOnly);
}

}  // namespace csi_proxy::disk

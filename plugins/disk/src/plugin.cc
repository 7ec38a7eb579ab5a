// The disk group library: serves csi-proxy-disk-v1. The adapter only moves fields between the version's
// messages and the version-neutral DiskService.
#include "csi_proxy/plugin.hpp"

#include <cctype>
#include <memory>
#include <string>

#include "disk_backend_linux.h"
#include "disk_service.h"
#include "v1/disk.pb.h"

namespace csi_proxy::disk {
namespace {

using sdk::CallContext;

constexpr const char* kPartitionTypeKey = "partition_type";

// A GPT type GUID as text: 8-4-4-4-12 hex digits.
bool IsGuid(const std::string& text) {
  if (text.size() != 36) return false;
  for (size_t i = 0; i < text.size(); ++i) {
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? text[i] != '-' : !std::isxdigit(static_cast<unsigned char>(text[i]))) return false;
  }
  return true;
}

void AddV1(sdk::ServiceBuilder& svc, DiskService& disks) {
  svc.Unary<v1::ListDiskLocationsRequest, v1::ListDiskLocationsResponse>(
         "ListDiskLocations",
         [&disks](const v1::ListDiskLocationsRequest&, v1::ListDiskLocationsResponse& resp, CallContext&) {
           auto locations = disks.ListDiskLocations();
           if (!locations.ok()) return locations.status();
           for (const auto& [number, loc] : *locations) {
             v1::DiskLocation& out = (*resp.mutable_disk_locations())[number];
             out.set_adapter(loc.adapter);
             out.set_bus(loc.bus);
             out.set_target(loc.target);
             out.set_lunid(loc.lun_id);
           }
           return Status::Ok();
         })
      .Unary<v1::PartitionDiskRequest, v1::PartitionDiskResponse>(
          "PartitionDisk", [&disks](const v1::PartitionDiskRequest& req, v1::PartitionDiskResponse&,
                                    CallContext&) { return disks.PartitionDisk(req.disk_number()); })
      .Unary<v1::RescanRequest, v1::RescanResponse>(
          "Rescan", [&disks](const v1::RescanRequest&, v1::RescanResponse&, CallContext&) { return disks.Rescan(); })
      .Unary<v1::ListDiskIDsRequest, v1::ListDiskIDsResponse>(
          "ListDiskIDs",
          [&disks](const v1::ListDiskIDsRequest&, v1::ListDiskIDsResponse& resp, CallContext&) {
            auto ids = disks.ListDiskIds();
            if (!ids.ok()) return ids.status();
            for (const auto& [number, id] : *ids) {
              v1::DiskIDs& out = (*resp.mutable_diskids())[number];
              out.set_page83(id.page83);
              out.set_serial_number(id.serial_number);
            }
            return Status::Ok();
          })
      .Unary<v1::GetDiskStatsRequest, v1::GetDiskStatsResponse>(
          "GetDiskStats",
          [&disks](const v1::GetDiskStatsRequest& req, v1::GetDiskStatsResponse& resp, CallContext&) {
            auto size = disks.GetDiskStats(req.disk_number());
            if (size.ok()) resp.set_total_bytes(*size);
            return size.status();
          })
      .Unary<v1::SetDiskStateRequest, v1::SetDiskStateResponse>(
          "SetDiskState", [&disks](const v1::SetDiskStateRequest& req, v1::SetDiskStateResponse&,
                                   CallContext&) { return disks.SetDiskState(req.disk_number(), req.is_online()); })
      .Unary<v1::GetDiskStateRequest, v1::GetDiskStateResponse>(
          "GetDiskState", [&disks](const v1::GetDiskStateRequest& req, v1::GetDiskStateResponse& resp, CallContext&) {
            auto online = disks.GetDiskState(req.disk_number());
            if (online.ok()) resp.set_is_online(*online);
            return online.status();
          });
}

class DiskPlugin : public sdk::Plugin {
 public:
  Status Init(sdk::Host& host) override {
    const sdk::PluginConfig& config = host.config();
    for (const auto& [key, value] : config.group_table()) {
      if (key.str() != kPartitionTypeKey) {
        return InvalidArgument("disk group: unknown key '" + std::string(key.str()) + "' (the only key is '" +
                               kPartitionTypeKey + "')");
      }
    }
    LinuxDiskOptions options;
    auto type = config.GetString(kPartitionTypeKey, options.gpt_partition_type);
    if (!type.ok()) return type.status().WithContext("disk group");
    if (!IsGuid(*type)) {
      return InvalidArgument(
          "disk group: partition_type must be a GPT type GUID such as "
          "0fc63daf-8483-4772-8e79-3d69d8477de4, not '" +
          *type + "'");
    }
    std::string guid = *type;
    for (char& c : guid) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    options.gpt_partition_type = guid;
    backend_ = std::make_unique<LinuxDiskBackend>(std::move(options));
    service_ = std::make_unique<DiskService>(*backend_);
    AddV1(host.AddService("v1", "v1.Disk"), *service_);
    sdk::LogInfo("disk group ready; new partitions get GPT type " + guid);
    return Status::Ok();
  }

 private:
  std::unique_ptr<LinuxDiskBackend> backend_;
  std::unique_ptr<DiskService> service_;
};

}  // namespace
}  // namespace csi_proxy::disk

CSI_PROXY_PLUGIN(csi_proxy::disk::DiskPlugin, "disk", "0.1.0")

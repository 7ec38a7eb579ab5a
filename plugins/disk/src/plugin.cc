// The disk group library: serves csi-proxy-disk-v1 and the older v1beta3, v1beta2, v1beta1 and v1alpha1. Each
// version only moves fields between its messages and the one version-neutral DiskService. v1 and v1beta3 share
// their message shapes (one template); the older versions name disks by decimal strings.
#include "csi_proxy/plugin.hpp"

#include <cctype>
#include <memory>
#include <string>

#include "disk_backend_linux.h"
#include "disk_service.h"
#include "v1/disk.pb.h"
#include "v1alpha1/disk.pb.h"
#include "v1beta1/disk.pb.h"
#include "v1beta2/disk.pb.h"
#include "v1beta3/disk.pb.h"

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

template <typename Location>
void FillLocation(const DiskLocation& in, Location& out) {
  out.set_adapter(in.adapter);
  out.set_bus(in.bus);
  out.set_target(in.target);
  out.set_lunid(in.lun_id);
}

// ListDiskLocations of any version; `Key` turns a disk number into the version's map key.
template <typename Resp, typename Key>
Status ListLocations(DiskService& disks, Resp& resp, Key key) {
  auto locations = disks.ListDiskLocations();
  if (!locations.ok()) return locations.status();
  for (const auto& [number, loc] : *locations) FillLocation(loc, (*resp.mutable_disk_locations())[key(number)]);
  return Status::Ok();
}

// v1 and v1beta3: disks by uint32 number.
template <typename Ns>
void AddCurrentMethods(sdk::ServiceBuilder& svc, DiskService& disks) {
  using Locs = typename Ns::ListDiskLocationsRequest;
  using Part = typename Ns::PartitionDiskRequest;
  using Ids = typename Ns::ListDiskIDsRequest;
  using Stats = typename Ns::GetDiskStatsRequest;
  using SetState = typename Ns::SetDiskStateRequest;
  using GetState = typename Ns::GetDiskStateRequest;
  svc.template Unary<Locs, typename Ns::ListDiskLocationsResponse>(
      "ListDiskLocations", [&disks](const Locs&, auto& resp, CallContext&) {
        return ListLocations(disks, resp, [](uint32_t n) { return n; });
      });
  svc.template Unary<Part, typename Ns::PartitionDiskResponse>(
      "PartitionDisk",
      [&disks](const Part& req, auto&, CallContext&) { return disks.PartitionDisk(req.disk_number()); });
  svc.template Unary<typename Ns::RescanRequest, typename Ns::RescanResponse>(
      "Rescan", [&disks](const auto&, auto&, CallContext&) { return disks.Rescan(); });
  svc.template Unary<Ids, typename Ns::ListDiskIDsResponse>("ListDiskIDs",
                                                            [&disks](const Ids&, auto& resp, CallContext&) {
                                                              auto ids = disks.ListDiskIds();
                                                              if (!ids.ok()) return ids.status();
                                                              for (const auto& [number, id] : *ids) {
                                                                auto& out = (*resp.mutable_diskids())[number];
                                                                out.set_page83(id.page83);
                                                                out.set_serial_number(id.serial_number);
                                                              }
                                                              return Status::Ok();
                                                            });
  svc.template Unary<Stats, typename Ns::GetDiskStatsResponse>("GetDiskStats",
                                                               [&disks](const Stats& req, auto& resp, CallContext&) {
                                                                 auto size = disks.GetDiskStats(req.disk_number());
                                                                 if (size.ok()) resp.set_total_bytes(*size);
                                                                 return size.status();
                                                               });
  svc.template Unary<SetState, typename Ns::SetDiskStateResponse>(
      "SetDiskState", [&disks](const SetState& req, auto&, CallContext&) {
        return disks.SetDiskState(req.disk_number(), req.is_online());
      });
  svc.template Unary<GetState, typename Ns::GetDiskStateResponse>(
      "GetDiskState", [&disks](const GetState& req, auto& resp, CallContext&) {
        auto online = disks.GetDiskState(req.disk_number());
        if (online.ok()) resp.set_is_online(*online);
        return online.status();
      });
}

#define CSI_PROXY_DISK_CURRENT_MESSAGES(ns)                          \
  struct ns##Messages {                                              \
    using ListDiskLocationsRequest = ns::ListDiskLocationsRequest;   \
    using ListDiskLocationsResponse = ns::ListDiskLocationsResponse; \
    using PartitionDiskRequest = ns::PartitionDiskRequest;           \
    using PartitionDiskResponse = ns::PartitionDiskResponse;         \
    using RescanRequest = ns::RescanRequest;                         \
    using RescanResponse = ns::RescanResponse;                       \
    using ListDiskIDsRequest = ns::ListDiskIDsRequest;               \
    using ListDiskIDsResponse = ns::ListDiskIDsResponse;             \
    using GetDiskStatsRequest = ns::GetDiskStatsRequest;             \
    using GetDiskStatsResponse = ns::GetDiskStatsResponse;           \
    using SetDiskStateRequest = ns::SetDiskStateRequest;             \
    using SetDiskStateResponse = ns::SetDiskStateResponse;           \
    using GetDiskStateRequest = ns::GetDiskStateRequest;             \
    using GetDiskStateResponse = ns::GetDiskStateResponse;           \
  };
CSI_PROXY_DISK_CURRENT_MESSAGES(v1)
CSI_PROXY_DISK_CURRENT_MESSAGES(v1beta3)
#undef CSI_PROXY_DISK_CURRENT_MESSAGES

std::string DiskKey(uint32_t number) { return std::to_string(number); }

// ListDiskLocations, PartitionDisk and Rescan of the string-keyed versions (v1alpha1, v1beta1, v1beta2).
template <typename Ns, typename PartitionRequest>
void AddLegacyBasics(sdk::ServiceBuilder& svc, DiskService& disks, std::string (*disk_id)(const PartitionRequest&)) {
  svc.template Unary<typename Ns::ListDiskLocationsRequest, typename Ns::ListDiskLocationsResponse>(
      "ListDiskLocations",
      [&disks](const auto&, auto& resp, CallContext&) { return ListLocations(disks, resp, DiskKey); });
  svc.template Unary<PartitionRequest, typename Ns::PartitionDiskResponse>(
      "PartitionDisk", [&disks, disk_id](const PartitionRequest& req, auto&, CallContext&) {
        auto number = DiskService::ParseDiskId(disk_id(req));
        return number.ok() ? disks.PartitionDisk(*number) : number.status();
      });
  svc.template Unary<typename Ns::RescanRequest, typename Ns::RescanResponse>(
      "Rescan", [&disks](const auto&, auto&, CallContext&) { return disks.Rescan(); });
}

// ListDiskIDs and DiskStats of v1beta1 and v1beta2.
template <typename Ns>
void AddLegacyIdsAndStats(sdk::ServiceBuilder& svc, DiskService& disks) {
  svc.template Unary<typename Ns::ListDiskIDsRequest, typename Ns::ListDiskIDsResponse>(
      "ListDiskIDs", [&disks](const auto&, auto& resp, CallContext&) {
        auto ids = disks.ListDiskIds();
        if (!ids.ok()) return ids.status();
        for (const auto& [number, id] : *ids) {
          auto& identifiers = *(*resp.mutable_diskids())[DiskKey(number)].mutable_identifiers();
          identifiers["page83"] = id.page83;
          identifiers["serialNumber"] = id.serial_number;
        }
        return Status::Ok();
      });
  svc.template Unary<typename Ns::DiskStatsRequest, typename Ns::DiskStatsResponse>(
      "DiskStats", [&disks](const typename Ns::DiskStatsRequest& req, auto& resp, CallContext&) {
        auto number = DiskService::ParseDiskId(req.diskid());
        if (!number.ok()) return number.status();
        auto size = disks.GetDiskStats(*number);
        if (size.ok()) resp.set_disksize(*size);
        return size.status();
      });
}

struct v1alpha1Messages {
  using ListDiskLocationsRequest = v1alpha1::ListDiskLocationsRequest;
  using ListDiskLocationsResponse = v1alpha1::ListDiskLocationsResponse;
  using PartitionDiskResponse = v1alpha1::PartitionDiskResponse;
  using RescanRequest = v1alpha1::RescanRequest;
  using RescanResponse = v1alpha1::RescanResponse;
};
#define CSI_PROXY_DISK_BETA_MESSAGES(ns)                             \
  struct ns##Messages {                                              \
    using ListDiskLocationsRequest = ns::ListDiskLocationsRequest;   \
    using ListDiskLocationsResponse = ns::ListDiskLocationsResponse; \
    using PartitionDiskResponse = ns::PartitionDiskResponse;         \
    using RescanRequest = ns::RescanRequest;                         \
    using RescanResponse = ns::RescanResponse;                       \
    using ListDiskIDsRequest = ns::ListDiskIDsRequest;               \
    using ListDiskIDsResponse = ns::ListDiskIDsResponse;             \
    using DiskStatsRequest = ns::DiskStatsRequest;                   \
    using DiskStatsResponse = ns::DiskStatsResponse;                 \
  };
CSI_PROXY_DISK_BETA_MESSAGES(v1beta1)
CSI_PROXY_DISK_BETA_MESSAGES(v1beta2)
#undef CSI_PROXY_DISK_BETA_MESSAGES

void AddV1alpha1(sdk::ServiceBuilder& svc, DiskService& disks) {
  AddLegacyBasics<v1alpha1Messages, v1alpha1::PartitionDiskRequest>(
      svc, disks, [](const v1alpha1::PartitionDiskRequest& req) { return req.disk_id(); });
  svc.Unary<v1alpha1::GetDiskNumberByNameRequest, v1alpha1::GetDiskNumberByNameResponse>(
      "GetDiskNumberByName", [&disks](const v1alpha1::GetDiskNumberByNameRequest& req,
                                      v1alpha1::GetDiskNumberByNameResponse& resp, CallContext&) {
        auto number = disks.GetDiskNumberByName(req.disk_name());
        if (number.ok()) resp.set_disk_number(DiskKey(*number));
        return number.status();
      });
}

void AddV1beta1(sdk::ServiceBuilder& svc, DiskService& disks) {
  AddLegacyBasics<v1beta1Messages, v1beta1::PartitionDiskRequest>(
      svc, disks, [](const v1beta1::PartitionDiskRequest& req) { return req.diskid(); });
  AddLegacyIdsAndStats<v1beta1Messages>(svc, disks);
}

void AddV1beta2(sdk::ServiceBuilder& svc, DiskService& disks) {
  AddLegacyBasics<v1beta2Messages, v1beta2::PartitionDiskRequest>(
      svc, disks, [](const v1beta2::PartitionDiskRequest& req) { return req.diskid(); });
  AddLegacyIdsAndStats<v1beta2Messages>(svc, disks);
  svc.Unary<v1beta2::SetAttachStateRequest, v1beta2::SetAttachStateResponse>(
      "SetAttachState",
      [&disks](const v1beta2::SetAttachStateRequest& req, v1beta2::SetAttachStateResponse&, CallContext&) {
        auto number = DiskService::ParseDiskId(req.diskid());
        return number.ok() ? disks.SetDiskState(*number, req.isonline()) : number.status();
      });
  svc.Unary<v1beta2::GetAttachStateRequest, v1beta2::GetAttachStateResponse>(
      "GetAttachState",
      [&disks](const v1beta2::GetAttachStateRequest& req, v1beta2::GetAttachStateResponse& resp, CallContext&) {
        auto number = DiskService::ParseDiskId(req.diskid());
        if (!number.ok()) return number.status();
        auto online = disks.GetDiskState(*number);
        if (online.ok()) resp.set_isonline(*online);
        return online.status();
      });
}

class DiskPlugin : public sdk::Plugin {
 public:
  Status Init(sdk::Host& host) override {
    const sdk::PluginConfig& config = host.config();
    CSI_PROXY_RETURN_IF_ERROR(config.RequireKnownKeys({kPartitionTypeKey}));
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

    AddCurrentMethods<v1Messages>(host.AddService("v1", "v1.Disk"), *service_);
    AddCurrentMethods<v1beta3Messages>(host.AddService("v1beta3", "v1beta3.Disk"), *service_);
    AddV1beta2(host.AddService("v1beta2", "v1beta2.Disk"), *service_);
    AddV1beta1(host.AddService("v1beta1", "v1beta1.Disk"), *service_);
    AddV1alpha1(host.AddService("v1alpha1", "v1alpha1.Disk"), *service_);
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

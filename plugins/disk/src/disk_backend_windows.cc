// The disk group on Windows; see disk_backend_windows.h.
#include "disk_backend_windows.h"

#include <windows.h>

#include <algorithm>

#include "storage_ioctl.h"
#include "text.h"
#include "win32_windows.h"
#include "wmi.h"

namespace csi_proxy::disk {
namespace {

using common::DeviceAccess;
using common::StorageSystem;
namespace ioctl = common::ioctl;
namespace wmi = common::wmi;

// MSFT_Disk.PartitionStyle and MSFT_Disk.Initialize's argument.
constexpr int64_t kPartitionStyleRaw = 0;
constexpr int64_t kPartitionStyleMbr = 1;
constexpr int64_t kPartitionStyleGpt = 2;
// The MBR type Windows gives a basic data partition (IFS: NTFS, exFAT, ReFS).
constexpr int64_t kMbrTypeIfs = 7;
constexpr const char* kMicrosoftReserved = "e3c9e316-0b5c-4db8-817d-f92df00215ae";
// Storage Management API return values the flow expects (wmi.cc has their meaning).
constexpr uint32_t kAlreadyInitialized = 41001;
constexpr uint32_t kAccessPathInUse = 42002;

std::string DiskText(uint32_t number) { return "disk " + std::to_string(number); }

// A GPT type as MSFT_Partition.GptType shows it ("{ebd0a0a2-...}") without its braces, lowercase.
std::string BareGuid(std::string text) {
  if (text.size() == 38 && text.front() == '{' && text.back() == '}') text = text.substr(1, 36);
  return common::AsciiLower(text);
}

// A partition that holds data: not Microsoft Reserved, not an MBR extended partition (a container).
bool IsDataPartition(const wmi::Object& partition) {
  if (auto gpt = partition.GetString("GptType"); gpt.ok() && BareGuid(*gpt) == kMicrosoftReserved) return false;
  if (auto mbr = partition.GetUint("MbrType"); mbr.ok() && (*mbr == 5 || *mbr == 15)) return false;
  return true;
}

class WindowsDiskBackend final : public DiskBackend {
 public:
  WindowsDiskBackend(std::shared_ptr<StorageSystem> system, DiskBackendOptions options)
      : system_(std::move(system)), options_(std::move(options)) {}

  StatusOr<std::map<uint32_t, DiskLocation>> ListDiskLocations() override {
    std::map<uint32_t, DiskLocation> locations;
    for (const auto& [number, path] : common::ListDisks(*system_)) {
      // Disks without a SCSI address (the IOCTL fails) are left out, as on Linux.
      auto answer = system_->Ioctl(path, ioctl::kScsiGetAddress, {}, DeviceAccess::kQuery);
      auto address = answer.ok() ? ioctl::ParseScsiAddress(answer.value) : std::nullopt;
      if (!address) continue;
      locations[number] = DiskLocation{std::to_string(address->port), std::to_string(address->path),
                                       std::to_string(address->target), std::to_string(address->lun)};
    }
    return locations;
  }

  StatusOr<std::map<uint32_t, DiskIds>> ListDiskIds() override {
    std::map<uint32_t, DiskIds> ids;
    for (const auto& [number, path] : common::ListDisks(*system_)) ids[number] = IdsOf(path);
    return ids;
  }

  StatusOr<uint32_t> FindDiskByPage83(const std::string& page83) override {
    for (const auto& [number, path] : common::ListDisks(*system_)) {
      if (IdsOf(path).page83 == page83) return number;
    }
    return NotFound("no disk has the page 0x83 identifier " + common::QuotePath(page83));
  }

  StatusOr<int64_t> GetDiskSize(uint32_t disk_number) override {
    CSI_PROXY_ASSIGN_OR_RETURN(std::string path, common::FindDisk(*system_, disk_number));
    auto answer = system_->Ioctl(path, ioctl::kDiskGetDriveGeometryEx, {}, DeviceAccess::kQuery);
    if (!answer.ok()) return common::Win32Status(answer.error, "reading the size of " + DiskText(disk_number));
    auto size = ioctl::ParseDiskSize(answer.value);
    if (!size) return Internal("the geometry of " + DiskText(disk_number) + " is too short to read");
    return static_cast<int64_t>(*size);
  }

  StatusOr<bool> GetDiskState(uint32_t disk_number) override {
    CSI_PROXY_ASSIGN_OR_RETURN(std::string path, common::FindDisk(*system_, disk_number));
    auto answer = system_->Ioctl(path, ioctl::kDiskGetDiskAttributes, {}, DeviceAccess::kQuery);
    if (answer.error == ERROR_INVALID_FUNCTION || answer.error == ERROR_NOT_SUPPORTED) {
      return Unimplemented(common::Win32Message("the driver of " + DiskText(disk_number) +
                                                    " keeps no disk attributes, so it has no online state "
                                                    "(IOCTL_DISK_GET_DISK_ATTRIBUTES)",
                                                answer.error));
    }
    if (!answer.ok()) return common::Win32Status(answer.error, "reading the attributes of " + DiskText(disk_number));
    auto attributes = ioctl::ParseDiskAttributes(answer.value);
    if (!attributes) return Internal("the attributes of " + DiskText(disk_number) + " are too short to read");
    return (*attributes & ioctl::kDiskAttributeOffline) == 0;
  }

  Status SetDiskState(uint32_t disk_number, bool online) override {
    const std::string what = DiskText(disk_number);
    CSI_PROXY_RETURN_IF_ERROR(common::FindDisk(*system_, disk_number).status());
    CSI_PROXY_ASSIGN_OR_RETURN(auto session, system_->Wmi(wmi::kStorageNamespace));
    CSI_PROXY_ASSIGN_OR_RETURN(wmi::Object disk, QueryDisk(*session, disk_number));
    CSI_PROXY_ASSIGN_OR_RETURN(bool offline, disk.GetBool("IsOffline"));
    if (offline != online) return Status::Ok();  // already so
    if (!online) {
      // As on Linux, a disk whose volume is mounted is not taken from under it. Windows dismounts the disk's
      // volumes when it goes offline, which writes their caches.
      CSI_PROXY_ASSIGN_OR_RETURN(auto volumes, common::VolumesOnDisk(*system_, disk_number));
      for (const auto& volume : volumes) {
        auto paths = system_->VolumePaths(volume.volume);
        if (paths.ok() && !paths.value.empty()) {
          return FailedPrecondition(what + " is in use: volume " + volume.volume + " is mounted at " +
                                    common::QuotePath(paths.value.front()) + "; refusing to take it offline");
        }
      }
    }
    const char* method = online ? "Online" : "Offline";
    CSI_PROXY_ASSIGN_OR_RETURN(auto result, session->Call(disk, method, {}));
    return wmi::MethodStatus(result, "MSFT_Disk", method,
                             online ? "bringing " + what + " online" : "taking " + what + " offline");
  }

  Status PartitionDisk(uint32_t disk_number) override {
    const std::string what = DiskText(disk_number);
    CSI_PROXY_RETURN_IF_ERROR(common::FindDisk(*system_, disk_number).status());
    CSI_PROXY_ASSIGN_OR_RETURN(auto session, system_->Wmi(wmi::kStorageNamespace));
    CSI_PROXY_ASSIGN_OR_RETURN(wmi::Object disk, QueryDisk(*session, disk_number));
    CSI_PROXY_ASSIGN_OR_RETURN(bool offline, disk.GetBool("IsOffline"));
    CSI_PROXY_ASSIGN_OR_RETURN(auto partitions, DataPartitions(*session, disk_number, {"PartitionNumber"}));
    // Nothing is written to an offline disk; one that has a partition needs nothing (GCE, EBS and vSphere stage a
    // disk again with PartitionDisk before SetDiskState(online)).
    if (offline && partitions.empty()) {
      return FailedPrecondition(what + " is offline; bring it online with SetDiskState before partitioning it");
    }
    if (!partitions.empty()) return Status::Ok();  // a retry, or a disk partitioned before: left as it is

    CSI_PROXY_ASSIGN_OR_RETURN(uint64_t style, disk.GetUint("PartitionStyle"));
    if (static_cast<int64_t>(style) == kPartitionStyleRaw) {
      // A RAW disk Windows mounts anyway holds a file system on the whole disk: never initialized over it.
      CSI_PROXY_ASSIGN_OR_RETURN(auto volumes, common::VolumesOnDisk(*system_, disk_number));
      if (!volumes.empty()) {
        return FailedPrecondition(what + " holds a file system on the whole disk (volume " + volumes.front().volume +
                                  "); refusing to partition it");
      }
      CSI_PROXY_ASSIGN_OR_RETURN(auto initialized,
                                 session->Call(disk, "Initialize", {{"PartitionStyle", kPartitionStyleGpt}}));
      if (initialized.return_value != kAlreadyInitialized) {
        CSI_PROXY_RETURN_IF_ERROR(wmi::MethodStatus(initialized, "MSFT_Disk", "Initialize", "initializing " + what));
      }
      style = kPartitionStyleGpt;
    }

    // One partition over the disk, as upstream makes it: the basic data type (or the configured one) on GPT, IFS
    // on MBR, no drive letter.
    wmi::Arguments arguments = {{"UseMaximumSize", true}, {"AssignDriveLetter", false}};
    if (static_cast<int64_t>(style) == kPartitionStyleMbr) {
      arguments.emplace_back("MbrType", kMbrTypeIfs);
    } else {
      arguments.emplace_back("GptType", "{" + options_.gpt_partition_type + "}");
    }
    CSI_PROXY_ASSIGN_OR_RETURN(auto created, session->Call(disk, "CreatePartition", arguments));
    if (created.return_value != kAccessPathInUse) {  // made, without the access path it could not assign
      CSI_PROXY_RETURN_IF_ERROR(wmi::MethodStatus(created, "MSFT_Disk", "CreatePartition", "partitioning " + what));
    }
    CSI_PROXY_ASSIGN_OR_RETURN(auto refreshed, session->Call(disk, "Refresh", {}));
    CSI_PROXY_RETURN_IF_ERROR(wmi::MethodStatus(refreshed, "MSFT_Disk", "Refresh", "rereading " + what));

    // A disk's new partition may come up offline (a SAN policy keeps new disks' partitions so): bring it online.
    CSI_PROXY_ASSIGN_OR_RETURN(partitions, DataPartitions(*session, disk_number, {}));
    if (partitions.empty()) {
      return Internal("partitioning " + what +
                      ": MSFT_Disk.CreatePartition succeeded, but the disk lists no partition");
    }
    CSI_PROXY_ASSIGN_OR_RETURN(auto online, session->Call(partitions.front(), "Online", {}));
    return wmi::MethodStatus(online, "MSFT_Partition", "Online", "bringing the new partition of " + what + " online");
  }

  Status Rescan() override {
    CSI_PROXY_ASSIGN_OR_RETURN(auto session, system_->Wmi(wmi::kStorageNamespace));
    CSI_PROXY_ASSIGN_OR_RETURN(auto result, session->CallStatic("MSFT_StorageSetting", "UpdateHostStorageCache", {}));
    return wmi::MethodStatus(result, "MSFT_StorageSetting", "UpdateHostStorageCache", "rescanning the disks");
  }

 private:
  // Identifiers as upstream reports them: page 0x83 from the device id descriptor, the serial number from the
  // device descriptor; empty where the device has none or does not answer.
  DiskIds IdsOf(const std::string& path) {
    DiskIds ids;
    const auto id_query = ioctl::PropertyQuery(ioctl::kStorageDeviceIdProperty);
    if (auto answer = system_->Ioctl(path, ioctl::kStorageQueryProperty, id_query, DeviceAccess::kQuery); answer.ok()) {
      ids.page83 = ioctl::Page83FromDeviceIdDescriptor(answer.value);
    }
    const auto device_query = ioctl::PropertyQuery(ioctl::kStorageDeviceProperty);
    if (auto answer = system_->Ioctl(path, ioctl::kStorageQueryProperty, device_query, DeviceAccess::kQuery);
        answer.ok()) {
      if (auto descriptor = ioctl::ParseDeviceDescriptor(answer.value)) ids.serial_number = descriptor->serial_number;
    }
    return ids;
  }

  // The disk's MSFT_Disk instance, whole (its methods are called).
  static StatusOr<wmi::Object> QueryDisk(wmi::Session& session, uint32_t number) {
    CSI_PROXY_ASSIGN_OR_RETURN(auto disks,
                               session.Execute(wmi::Query{"MSFT_Disk", {}, {{"Number", "=", int64_t{number}}}}));
    if (disks.empty()) {
      return NotFound(DiskText(number) + " is not known to the Storage Management API (MSFT_Disk); Rescan first");
    }
    return std::move(disks.front());
  }

  // The disk's partitions that hold data, in partition order; `properties` as wmi::Query (empty: whole objects).
  static StatusOr<std::vector<wmi::Object>> DataPartitions(wmi::Session& session, uint32_t number,
                                                           std::vector<std::string> properties) {
    if (!properties.empty()) {
      properties.insert(properties.end(), {"GptType", "MbrType"});
    }
    CSI_PROXY_ASSIGN_OR_RETURN(
        auto all, session.Execute(wmi::Query{"MSFT_Partition", properties, {{"DiskNumber", "=", int64_t{number}}}}));
    std::vector<wmi::Object> data;
    for (auto& partition : all) {
      if (IsDataPartition(partition)) data.push_back(std::move(partition));
    }
    auto number_of = [](const wmi::Object& p) {
      return p.GetUint("PartitionNumber").ok() ? *p.GetUint("PartitionNumber") : 0;
    };
    std::sort(data.begin(), data.end(), [&](const auto& a, const auto& b) { return number_of(a) < number_of(b); });
    return data;
  }

  std::shared_ptr<StorageSystem> system_;
  DiskBackendOptions options_;
};

}  // namespace

std::unique_ptr<DiskBackend> MakeWindowsDiskBackend(std::shared_ptr<StorageSystem> system,
                                                    const DiskBackendOptions& options) {
  return std::make_unique<WindowsDiskBackend>(std::move(system), options);
}

std::unique_ptr<DiskBackend> MakeDiskBackend(const DiskBackendOptions& options) {
  return MakeWindowsDiskBackend(common::MakeStorageSystem(), options);
}

}  // namespace csi_proxy::disk

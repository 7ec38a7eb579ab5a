// The volume group on Windows; see volume_backend_windows.h.
#include "volume_backend_windows.h"

#include <windows.h>

#include <algorithm>

#include "confined_open_windows.h"
#include "device_naming.h"
#include "storage_ioctl.h"
#include "text.h"
#include "win32_windows.h"
#include "wmi.h"

namespace csi_proxy::volume {
namespace {

using common::ConfinedPath;
using common::DeviceAccess;
using common::QuotePath;
using common::StorageSystem;
namespace ioctl = common::ioctl;
namespace wmi = common::wmi;

// Growth below one alignment unit is not worth a resize (as on Linux; upstream skips less than 100 MiB): a
// retried "grow to the maximum" then changes nothing, and Windows refuses to grow a partition by less.
constexpr uint64_t kMinPartitionGrowth = 1 << 20;

// Partitions that belong to the machine whatever mounts them: EFI system, Microsoft Reserved, Windows recovery
// (GPT), EFI and hidden recovery (MBR), and any GPT partition the platform requires.
constexpr const char* kSystemGptTypes[][2] = {
    {"c12a7328-f81f-11d2-ba4b-00a0c93ec93b", "an EFI system partition"},
    {"e3c9e316-0b5c-4db8-817d-f92df00215ae", "a Microsoft Reserved partition"},
    {"de94bba4-06d1-4d40-a16a-bfd50179d6ac", "a Windows recovery partition"},
};
constexpr uint64_t kGptAttributePlatformRequired = 0x1;

// MSFT_Volume.Format's FileSystem for each file system FormatVolume creates.
std::string FormatFileSystemName(const std::string& fs_type) { return fs_type == "refs" ? "ReFS" : "NTFS"; }

std::string WithoutTrailingSlash(std::string path) {
  if (path.size() > 3 && path.back() == '\\') path.pop_back();
  return path;
}

bool SameVolume(const std::string& a, const std::string& b) {
  auto x = common::CanonicalVolumeGuidPath(a);
  auto y = common::CanonicalVolumeGuidPath(b);
  return x && y && *x == *y;
}

class WindowsVolumeBackend final : public VolumeBackend {
 public:
  WindowsVolumeBackend(std::shared_ptr<StorageSystem> system, common::PathPolicy policy, VolumeBackendOptions options)
      : system_(std::move(system)), policy_(std::move(policy)), options_(std::move(options)) {}

  StatusOr<ResolvedVolume> ResolveVolume(const std::string& volume_id) override {
    auto canonical = common::CanonicalVolumeGuidPath(volume_id);
    if (!canonical) {
      return InvalidArgument("volume id " + QuotePath(volume_id) +
                             " is not a volume GUID path (\\\\?\\Volume{...}\\, as ListVolumesOnDisk gives them)");
    }
    auto volumes = system_->VolumeNames();
    if (!volumes.ok()) return common::Win32Status(volumes.error, "listing the volumes");
    for (const std::string& name : volumes.value) {
      if (SameVolume(name, *canonical)) return ResolvedVolume{*canonical, *canonical};
    }
    return NotFound("no volume " + QuotePath(*canonical));
  }

  StatusOr<std::vector<std::string>> ListVolumesOnDisk(uint32_t disk_number, uint32_t partition_number) override {
    CSI_PROXY_RETURN_IF_ERROR(common::FindDisk(*system_, disk_number).status());
    CSI_PROXY_ASSIGN_OR_RETURN(auto volumes, common::VolumesOnDisk(*system_, disk_number));
    std::vector<std::string> ids;
    for (const auto& volume : volumes) {
      if (partition_number != 0 && volume.partition_number != partition_number) continue;
      if (auto canonical = common::CanonicalVolumeGuidPath(volume.volume)) ids.push_back(*canonical);
    }
    return ids;
  }

  Status MountVolume(const ResolvedVolume& volume, const ConfinedPath& target) override {
    CSI_PROXY_ASSIGN_OR_RETURN(auto dir, common::OpenFollowing(policy_, target, "target_path"));
    CSI_PROXY_ASSIGN_OR_RETURN(auto info, common::ReadEntryInfo(dir.get(), target.path));
    if (!info.is_directory()) {
      return FailedPrecondition("target_path " + QuotePath(target.path) + " is not a directory");
    }
    CSI_PROXY_ASSIGN_OR_RETURN(auto mounted, MountedAt(dir.get(), target));
    if (mounted) {
      if (SameVolume(*mounted, volume.id)) return Status::Ok();  // already there
      return FailedPrecondition("target_path " + QuotePath(target.path) + " already has volume " + *mounted +
                                " mounted on it");
    }
    CSI_PROXY_RETURN_IF_ERROR(RefuseHostOwnedVolume(volume.id, "mount"));
    auto file_system = system_->FileSystemName(volume.id);
    if (file_system.error == ERROR_UNRECOGNIZED_VOLUME) {
      return FailedPrecondition("volume " + volume.id + " is not formatted (it holds no file system Windows knows)");
    }
    // SetVolumeMountPoint takes a path: the directory is pinned so that the path stays the one the walk found.
    CSI_PROXY_ASSIGN_OR_RETURN(auto pinned, common::PinDirectory(dir.get(), target.path));
    const uint32_t error = system_->SetMountPoint(pinned.get(), volume.id);
    const std::string what = "mounting volume " + volume.id + " at " + QuotePath(target.path);
    if (error == 0) return Status::Ok();
    if (error == ERROR_DIR_NOT_EMPTY) {
      return FailedPrecondition(what +
                                ": the directory is not empty (Windows mounts volumes on empty directories only)");
    }
    if (error == ERROR_CALL_NOT_IMPLEMENTED || error == ERROR_NOT_SUPPORTED || error == ERROR_INVALID_FUNCTION) {
      return Unimplemented(common::Win32Message(what + ": this system cannot mount volumes on directories "
                                                       "(SetVolumeMountPoint)",
                                                error));
    }
    return common::Win32Status(error, what);
  }

  Status UnmountVolume(const ResolvedVolume& volume, const ConfinedPath& target) override {
    auto parent = common::OpenParent(policy_, target, "target_path");
    if (!parent.ok()) return parent.status().code() == Code::kNotFound ? Status::Ok() : parent.status();
    common::UniqueHandle entry;
    NTSTATUS opened = common::OpenBelow(parent->dir.get(), parent->name, FILE_READ_ATTRIBUTES, 0, entry);
    if (opened < 0) {
      Status status = common::NtStatusToStatus(opened, "opening target_path " + QuotePath(target.path));
      return status.code() == Code::kNotFound ? Status::Ok() : status;  // nothing there: nothing mounted
    }
    CSI_PROXY_ASSIGN_OR_RETURN(auto info, common::ReadEntryInfo(entry.get(), target.path));
    using Kind = common::ReparsePoint::Kind;
    if (info.reparse && (info.reparse->kind == Kind::kSymlink || info.reparse->kind == Kind::kJunction)) {
      // The mount point the link leads to is not removed through it (DeleteVolumeMountPoint would follow it).
      return FailedPrecondition("target_path " + QuotePath(target.path) +
                                " is a link; UnmountVolume takes the mount point itself");
    }
    if (!info.reparse) {
      CSI_PROXY_RETURN_IF_ERROR(
          common::CheckDirectlyInside(parent->dir.get(), entry.get(), policy_, "target_path", target.path));
    }
    entry.Reset();
    auto dir = common::OpenFollowing(policy_, target, "target_path");
    if (!dir.ok()) return dir.status().code() == Code::kNotFound ? Status::Ok() : dir.status();
    CSI_PROXY_ASSIGN_OR_RETURN(auto mounted, MountedAt(dir->get(), target));
    dir->Reset();
    if (!mounted) return Status::Ok();  // nothing mounted there: done already
    if (!SameVolume(*mounted, volume.id)) {
      return FailedPrecondition("target_path " + QuotePath(target.path) + " has volume " + *mounted +
                                " mounted on it, not " + QuotePath(volume.id));
    }
    // As upstream (its Write-VolumeCache before Remove-PartitionAccessPath); a volume that cannot be flushed is
    // still unmounted, as on Linux.
    (void)system_->FlushVolume(*mounted);
    CSI_PROXY_ASSIGN_OR_RETURN(auto pinned, common::PinDirectory(parent->dir.get(), target.path));
    const uint32_t error = system_->DeleteMountPoint(pinned.get(), parent->name);
    if (error == 0) return Status::Ok();
    return common::Win32Status(error, "unmounting volume " + *mounted + " from " + QuotePath(target.path));
  }

  StatusOr<bool> IsVolumeFormatted(const ResolvedVolume& volume) override {
    auto file_system = system_->FileSystemName(volume.id);
    if (file_system.error == ERROR_UNRECOGNIZED_VOLUME) return false;
    if (!file_system.ok()) return common::Win32Status(file_system.error, "reading the file system of " + volume.id);
    return !file_system.value.empty() && common::AsciiLower(file_system.value) != "raw";
  }

  Status FormatVolume(const ResolvedVolume& volume, const FormatOptions& options) override {
    const std::string fs_type = options.fs_type.empty() ? options_.default_fs_type : options.fs_type;
    const std::string what = "formatting volume " + volume.id;
    CSI_PROXY_ASSIGN_OR_RETURN(auto parameters, ParseFormatParameters(fs_type, options.mkfs_options));
    CSI_PROXY_RETURN_IF_ERROR(RefuseHostOwnedVolume(volume.id, "format"));
    auto paths = system_->VolumePaths(volume.id);
    if (!paths.ok()) return common::Win32Status(paths.error, what);
    auto file_system = system_->FileSystemName(volume.id);
    if (!file_system.ok() && file_system.error != ERROR_UNRECOGNIZED_VOLUME) {
      return common::Win32Status(file_system.error, what);
    }
    const std::string present = file_system.ok() ? common::AsciiLower(file_system.value) : "";
    if (paths.value.empty()) {
      // An unmounted volume is never overwritten, as on Linux: its file system already is the one asked for (a
      // retry), or it holds none.
      if (present == fs_type) return Status::Ok();
      if (!present.empty() && present != "raw") {
        return FailedPrecondition("volume " + volume.id + " holds " + file_system.value + ", not " + fs_type +
                                  "; refusing to format it");
      }
    }
    // Mounted only where MountVolume mounts (under the allowed roots, RefuseHostOwnedVolume saw to that): formatted
    // in place, as Format-Volume formats a mounted volume (sig-storage-local-static-provisioner cleans up so).
    CSI_PROXY_ASSIGN_OR_RETURN(auto session, system_->Wmi(wmi::kStorageNamespace));
    CSI_PROXY_ASSIGN_OR_RETURN(
        auto found, session->Execute(wmi::Query{"MSFT_Volume", {}, {{"UniqueId", "=", std::string(volume.id)}}}));
    if (found.empty()) {
      return NotFound(what + ": the Storage Management API (MSFT_Volume) does not know the volume; Rescan first");
    }
    wmi::Arguments arguments = {{"FileSystem", FormatFileSystemName(fs_type)},
                                {"FileSystemLabel", std::string()},
                                {"Full", false},
                                {"Force", true}};
    for (const auto& parameter : parameters) {
      auto at =
          std::find_if(arguments.begin(), arguments.end(), [&](const auto& a) { return a.first == parameter.name; });
      wmi::Value value = std::visit(
          [](const auto& v) -> wmi::Value {
            using V = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<V, uint64_t>) {
              return static_cast<int64_t>(v);  // AllocationUnitSize: a uint32
            } else {
              return v;
            }
          },
          parameter.value);
      if (at != arguments.end()) {
        at->second = std::move(value);
      } else {
        arguments.emplace_back(parameter.name, std::move(value));
      }
    }
    CSI_PROXY_ASSIGN_OR_RETURN(auto result, session->Call(found.front(), "Format", arguments));
    return wmi::MethodStatus(result, "MSFT_Volume", "Format", what);
  }

  std::string DefaultFilesystem() const override { return options_.default_fs_type; }

  Status ResizeVolume(const ResolvedVolume& volume, int64_t size_bytes) override {
    const std::string what = "resizing volume " + volume.id;
    CSI_PROXY_ASSIGN_OR_RETURN(auto number, DeviceNumber(volume.id));
    if (number.partition_number == 0) {
      return FailedPrecondition(what + ": it fills disk " + std::to_string(number.device_number) +
                                " without a partition, so it has none to grow");
    }
    CSI_PROXY_ASSIGN_OR_RETURN(auto session, system_->Wmi(wmi::kStorageNamespace));
    CSI_PROXY_ASSIGN_OR_RETURN(
        auto partitions, session->Execute(wmi::Query{"MSFT_Partition",
                                                     {},
                                                     {{"DiskNumber", "=", int64_t{number.device_number}},
                                                      {"PartitionNumber", "=", int64_t{number.partition_number}}}}));
    if (partitions.empty()) {
      return NotFound(what + ": the Storage Management API (MSFT_Partition) does not know partition " +
                      std::to_string(number.partition_number) + " of disk " + std::to_string(number.device_number) +
                      "; Rescan first");
    }
    const wmi::Object& partition = partitions.front();
    CSI_PROXY_ASSIGN_OR_RETURN(uint64_t current, partition.GetUint("Size"));
    CSI_PROXY_ASSIGN_OR_RETURN(auto supported, session->Call(partition, "GetSupportedSize", {}));
    CSI_PROXY_RETURN_IF_ERROR(wmi::MethodStatus(supported, "MSFT_Partition", "GetSupportedSize", what));
    CSI_PROXY_ASSIGN_OR_RETURN(uint64_t maximum, supported.out.GetUint("SizeMax"));
    const uint64_t wanted = size_bytes == 0 ? maximum : static_cast<uint64_t>(size_bytes);
    if (wanted > maximum) {
      return Status(Code::kOutOfRange, what + ": the partition can grow to at most " + std::to_string(maximum) +
                                           " bytes, not " + std::to_string(size_bytes) + " (grow the disk first)");
    }
    if (wanted < current) {
      return FailedPrecondition(what + ": the partition is " + std::to_string(current) + " bytes; shrinking it to " +
                                std::to_string(wanted) + " bytes is not supported (volumes only grow)");
    }
    if (wanted - current < kMinPartitionGrowth) return Status::Ok();
    // MSFT_Partition.Resize grows the file system with the partition.
    CSI_PROXY_ASSIGN_OR_RETURN(auto resized, session->Call(partition, "Resize", {{"Size", wmi::Decimal(wanted)}}));
    CSI_PROXY_RETURN_IF_ERROR(wmi::MethodStatus(resized, "MSFT_Partition", "Resize", what));
    // As upstream: the disk's cached layout is reread.
    CSI_PROXY_ASSIGN_OR_RETURN(
        auto disks, session->Execute(wmi::Query{"MSFT_Disk", {}, {{"Number", "=", int64_t{number.device_number}}}}));
    if (disks.empty()) return Status::Ok();
    CSI_PROXY_ASSIGN_OR_RETURN(auto refreshed, session->Call(disks.front(), "Refresh", {}));
    return wmi::MethodStatus(refreshed, "MSFT_Disk", "Refresh", what);
  }

  StatusOr<VolumeStats> GetVolumeStats(const ResolvedVolume& volume) override {
    auto space = system_->Space(volume.id);
    if (space.error == ERROR_UNRECOGNIZED_VOLUME) {
      return FailedPrecondition("volume " + volume.id + " holds no file system Windows knows");
    }
    if (!space.ok()) return common::Win32Status(space.error, "reading the size of volume " + volume.id);
    // As MSFT_Volume's Size and SizeRemaining, which upstream reads.
    return VolumeStats{static_cast<int64_t>(space.value.total),
                       static_cast<int64_t>(space.value.total - std::min(space.value.free, space.value.total))};
  }

  StatusOr<uint32_t> GetDiskNumber(const ResolvedVolume& volume) override {
    auto number = DeviceNumber(volume.id);
    if (number.ok()) return number->device_number;
    // A volume that is no single partition: its extents say whether it lies on one disk.
    auto answer = system_->Ioctl(volume.id, ioctl::kVolumeGetVolumeDiskExtents, {}, DeviceAccess::kQuery);
    auto extents = answer.ok() ? ioctl::ParseVolumeDiskExtents(answer.value) : std::nullopt;
    if (!extents) return number.status();
    std::vector<uint32_t> disks;
    for (const auto& e : *extents) {
      if (std::find(disks.begin(), disks.end(), e.disk_number) == disks.end()) disks.push_back(e.disk_number);
    }
    if (disks.size() == 1) return disks.front();
    return FailedPrecondition("volume " + volume.id + " lies on " + std::to_string(disks.size()) +
                              " disks; it has no single disk number");
  }

  StatusOr<std::string> GetVolumeIdFromTargetPath(const ConfinedPath& target) override {
    CSI_PROXY_ASSIGN_OR_RETURN(auto dir,
                               common::OpenFollowing(policy_, target, "target_path", common::Access::kExamine));
    CSI_PROXY_ASSIGN_OR_RETURN(auto mounted, MountedAt(dir.get(), target));
    if (!mounted) return NotFound("no volume is mounted at " + QuotePath(target.path));
    return *mounted;
  }

  StatusOr<std::string> GetClosestVolumeIdFromTargetPath(const ConfinedPath& target) override {
    CSI_PROXY_ASSIGN_OR_RETURN(auto dir,
                               common::OpenFollowing(policy_, target, "target_path", common::Access::kExamine));
    auto location = system_->Locate(dir.get());
    if (!location.ok()) return common::Win32Status(location.error, "locating " + QuotePath(target.path));
    auto canonical = common::CanonicalVolumeGuidPath(location.value.volume);
    if (!canonical)
      return Internal("Windows names the volume of " + QuotePath(target.path) + " " + location.value.volume);
    return *canonical;
  }

  Status WriteVolumeCache(const ResolvedVolume& volume) override {
    const uint32_t error = system_->FlushVolume(volume.id);
    const std::string what = "flushing volume " + volume.id;
    if (error == 0) return Status::Ok();
    if (error == ERROR_INVALID_FUNCTION || error == ERROR_NOT_SUPPORTED) {
      return Unimplemented(
          common::Win32Message(what + ": this system cannot flush a volume (FlushFileBuffers on it)", error));
    }
    return common::Win32Status(error, what);
  }

 private:
  // The volume mounted exactly at an open directory (the root of the volume it is on), or nullopt.
  StatusOr<std::optional<std::string>> MountedAt(HANDLE dir, const ConfinedPath& target) {
    auto location = system_->Locate(dir);
    if (!location.ok()) return common::Win32Status(location.error, "locating " + QuotePath(target.path));
    if (!location.value.path.empty()) return std::optional<std::string>();
    auto canonical = common::CanonicalVolumeGuidPath(location.value.volume);
    if (!canonical)
      return Internal("Windows names the volume at " + QuotePath(target.path) + " " + location.value.volume);
    return std::optional<std::string>(*canonical);
  }

  StatusOr<ioctl::DeviceNumber> DeviceNumber(const std::string& volume) {
    auto answer = system_->Ioctl(volume, ioctl::kStorageGetDeviceNumber, {}, DeviceAccess::kQuery);
    if (!answer.ok()) return common::Win32Status(answer.error, "reading the disk of volume " + volume);
    auto number = ioctl::ParseDeviceNumber(answer.value);
    if (!number) return Internal("the device number of volume " + volume + " is too short to read");
    return *number;
  }

  // FAILED_PRECONDITION for a volume the node uses itself (as on Linux): one with a drive letter or a mount point
  // outside the allowed roots, or a partition of the machine's own kinds.
  Status RefuseHostOwnedVolume(const std::string& volume, const std::string& action) {
    auto paths = system_->VolumePaths(volume);
    if (!paths.ok()) return common::Win32Status(paths.error, "reading the mount points of volume " + volume);
    for (const std::string& path : paths.value) {
      if (!policy_.SplitAtRoot(WithoutTrailingSlash(path))) {
        return FailedPrecondition("volume " + volume + " is mounted at " + QuotePath(path) +
                                  ", outside the allowed roots " + policy_.RootsForMessage() +
                                  " (a volume of the node itself?); refusing to " + action + " it");
      }
    }
    auto answer = system_->Ioctl(volume, ioctl::kDiskGetPartitionInfoEx, {}, DeviceAccess::kQuery);
    if (answer.error == ERROR_INVALID_FUNCTION || answer.error == ERROR_NOT_SUPPORTED) return Status::Ok();
    if (!answer.ok()) return common::Win32Status(answer.error, "reading the partition of volume " + volume);
    auto partition = ioctl::ParsePartitionInfo(answer.value);
    if (!partition) return Internal("the partition information of volume " + volume + " is too short to read");
    std::string kind;
    if (partition->style == ioctl::PartitionInfo::Style::kGpt) {
      for (const auto& [type, name] : kSystemGptTypes) {
        if (partition->gpt_type == type) kind = name;
      }
      if (kind.empty() && (partition->gpt_attributes & kGptAttributePlatformRequired) != 0) {
        kind = "a partition the platform requires";
      }
    } else if (partition->style == ioctl::PartitionInfo::Style::kMbr &&
               (partition->mbr_type == 0xEF || partition->mbr_type == 0x27)) {
      kind = partition->mbr_type == 0xEF ? "an EFI system partition" : "a recovery partition";
    }
    if (!kind.empty())
      return FailedPrecondition("volume " + volume + " is " + kind + "; refusing to " + action + " it");
    return Status::Ok();
  }

  std::shared_ptr<StorageSystem> system_;
  common::PathPolicy policy_;
  VolumeBackendOptions options_;
};

}  // namespace

const std::vector<std::string_view>& SupportedFilesystems() {
  static const std::vector<std::string_view> kFilesystems = {"ntfs", "refs"};
  return kFilesystems;
}

std::unique_ptr<VolumeBackend> MakeWindowsVolumeBackend(std::shared_ptr<StorageSystem> system,
                                                        common::PathPolicy policy,
                                                        const VolumeBackendOptions& options) {
  return std::make_unique<WindowsVolumeBackend>(std::move(system), std::move(policy), options);
}

std::unique_ptr<VolumeBackend> MakeVolumeBackend(common::PathPolicy policy, const VolumeBackendOptions& options) {
  return MakeWindowsVolumeBackend(common::MakeStorageSystem(), std::move(policy), options);
}

}  // namespace csi_proxy::volume

// The volume group's Windows backend (plugins/volume/src/volume_backend_windows.cc) behind its service, against
// recorded answers (volumes, their mount points, file systems and free space, IOCTL buffers, Win32 errors and the
// Storage Management API's MSFT_Volume and MSFT_Partition as Microsoft documents them) and real directories under
// a temporary kubelet tree, which the confined open walks as it does on a node. Written from Microsoft's
// documentation and upstream's code (pkg/os/volume, pkg/wmi); the storage groups have not yet run on a Windows node.
#include <winsock2.h>  // before any header that includes windows.h (windows_host.h)

#include <diskguid.h>
#include <gtest/gtest.h>

#include <memory>

#include "recorded_storage.h"
#include "storage_answers.h"
#include "storage_ioctl.h"
#include "volume_backend_windows.h"
#include "volume_service.h"
#include "windows_host.h"

namespace csi_proxy::volume {
namespace {

using testing::Ok;
using testing::RecordedStorage;
using testing::RecordedWmi;
namespace ioctl = common::ioctl;
namespace msft = testing::msft;
namespace wmi = common::wmi;

constexpr const char* kStorage = wmi::kStorageNamespace;
// Disk 2 (attached): a formatted data volume and an unformatted one. Disk 3: one volume. Disk 0: the OS disk, with
// C: and the EFI system partition.
const std::string kData = "\\\\?\\Volume{11111111-2222-3333-4444-555555555555}\\";
const std::string kRaw = "\\\\?\\Volume{66666666-7777-8888-9999-aaaaaaaaaaaa}\\";
const std::string kOnly = "\\\\?\\Volume{33333333-3333-3333-3333-333333333333}\\";
const std::string kSystem = "\\\\?\\Volume{00000000-0000-0000-0000-00000000000c}\\";
const std::string kEsp = "\\\\?\\Volume{00000000-0000-0000-0000-0000000000e5}\\";
constexpr uint64_t kGiB = 1ull << 30;

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

class WindowsVolumeBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = temp_.path();
    for (const std::string& dir : {kubelet(), kubelet() + "\\pods", target(), base_ + "\\outside"}) {
      ASSERT_TRUE(::CreateDirectoryA(dir.c_str(), nullptr)) << dir;
    }
    storage_ = std::make_shared<RecordedStorage>();
    storage_->disk_paths = {"\\\\.\\PhysicalDrive0", "\\\\.\\PhysicalDrive2", "\\\\.\\PhysicalDrive3"};
    for (uint32_t disk : {0u, 2u, 3u}) {
      storage_->Answer("\\\\.\\PhysicalDrive" + std::to_string(disk), ioctl::kStorageGetDeviceNumber,
                       testing::DeviceNumberAnswer(disk));
    }
    AddVolume(kData, 2, 2, "NTFS", {10 * kGiB, 4 * kGiB});
    AddVolume(kRaw, 2, 3, "", {});
    storage_->volumes[kRaw].file_system = {ERROR_UNRECOGNIZED_VOLUME, ""};
    storage_->volumes[kRaw].space = {ERROR_UNRECOGNIZED_VOLUME, {}};
    AddVolume(kOnly, 3, 1, "NTFS", {5 * kGiB, 5 * kGiB});
    AddVolume(kSystem, 0, 3, "NTFS", {127 * kGiB, 20 * kGiB});
    storage_->volumes[kSystem].paths = {"C:\\"};
    AddVolume(kEsp, 0, 1, "FAT32", {100 << 20, 70 << 20});
    storage_->Answer(common::VolumeDevice(kEsp), ioctl::kDiskGetPartitionInfoEx,
                     testing::GptPartitionAnswer(1, PARTITION_SYSTEM_GUID, GPT_ATTRIBUTE_PLATFORM_REQUIRED));

    auto policy = common::PathPolicy::Create(kubelet(), {});
    ASSERT_TRUE(policy.ok()) << policy.status().message();
    service_ = std::make_unique<VolumeService>(
        MakeWindowsVolumeBackend(storage_, *policy, VolumeBackendOptions{.default_fs_type = "ntfs"}), *policy);
  }

  void AddVolume(const std::string& volume, uint32_t disk, uint32_t partition, const std::string& file_system,
                 common::VolumeSpace space) {
    storage_->volumes[volume].file_system = {0, file_system};
    storage_->volumes[volume].space = {0, space};
    storage_->Answer(common::VolumeDevice(volume), ioctl::kStorageGetDeviceNumber,
                     testing::DeviceNumberAnswer(disk, partition));
    storage_->Answer(common::VolumeDevice(volume), ioctl::kDiskGetPartitionInfoEx,
                     testing::GptPartitionAnswer(partition, PARTITION_BASIC_DATA_GUID));
  }

  // The Storage Management API of the node: the data volume and its partition, whose methods answer as Microsoft
  // documents success; GetSupportedSize offers 20 GiB.
  void WithStorageApi() {
    auto& records = storage_->wmi;
    records.Add(kStorage, msft::Volume(kData, 14));
    records.Add(kStorage, msft::Volume(kRaw, 0));
    records.Add(kStorage, msft::Volume(kOnly, 14));
    records.Add(kStorage, msft::GptPartition(2, 2, msft::kBasicData, 10 * kGiB));
    records.Add(kStorage, msft::GptPartition(3, 1, msft::kBasicData, 5 * kGiB));
    records.Add(kStorage, msft::Disk(2, 2));
    records.Add(kStorage, msft::Disk(3, 2));
    auto ok = [](wmi::Object*, const wmi::Arguments&) { return StatusOr<wmi::MethodResult>(testing::Answer(0)); };
    records.OnMethod(kStorage, "MSFT_Volume", "Format", ok);
    records.OnMethod(kStorage, "MSFT_Partition", "Resize", [](wmi::Object* partition, const wmi::Arguments& in) {
      partition->Set("Size", RecordedWmi::Argument({"", "", "", "", in}, "Size"));
      return StatusOr<wmi::MethodResult>(testing::Answer(0));
    });
    records.OnMethod(kStorage, "MSFT_Partition", "GetSupportedSize", [](wmi::Object*, const wmi::Arguments&) {
      return StatusOr<wmi::MethodResult>(
          testing::Answer(0, {{"SizeMin", std::string("1048576")}, {"SizeMax", std::to_string(20 * kGiB)}}));
    });
    records.OnMethod(kStorage, "MSFT_Disk", "Refresh", ok);
  }

  std::string kubelet() const { return base_ + "\\kubelet"; }
  std::string target() const { return kubelet() + "\\staging"; }
  std::string TargetDos() const { return target() + "\\"; }

  testing::WindowsTempDir temp_;  // removed with everything in it
  std::string base_;
  std::shared_ptr<RecordedStorage> storage_;
  std::unique_ptr<VolumeService> service_;
};

// ---- IDs and listings

TEST_F(WindowsVolumeBackendTest, VolumeIdsAreVolumeGuidPathsAsUpstreamsAndOthersAreRefused) {
  EXPECT_EQ(Ok(service_->GetDiskNumberFromVolumeId(kData)), 2u);
  // Another spelling of the same GUID path names the same volume.
  EXPECT_EQ(Ok(service_->GetDiskNumberFromVolumeId(Upper(kData.substr(0, kData.size() - 1)))), 2u);
  for (const char* id : {"", "/dev/sdb1", "C:\\\\", "Volume{11111111-2222-3333-4444-555555555555}"}) {
    EXPECT_EQ(service_->IsVolumeFormatted(id).status().code(), Code::kInvalidArgument) << id;
  }
  auto unknown = service_->IsVolumeFormatted("\\\\?\\Volume{99999999-2222-3333-4444-555555555555}\\");
  EXPECT_EQ(unknown.status().code(), Code::kNotFound);
}

TEST_F(WindowsVolumeBackendTest, ListsTheVolumesOfADiskInPartitionOrder) {
  EXPECT_EQ(Ok(service_->ListVolumesOnDisk(2, 0)), (std::vector<std::string>{kData, kRaw}));
  EXPECT_EQ(Ok(service_->ListVolumesOnDisk(2, 3)), (std::vector<std::string>{kRaw}));
  EXPECT_TRUE(Ok(service_->ListVolumesOnDisk(2, 7)).empty());
  EXPECT_EQ(service_->ListVolumesOnDisk(9, 0).status().code(), Code::kNotFound);
}

TEST_F(WindowsVolumeBackendTest, DiskNumbersOfPartitionsAndOfVolumesOnOneDisk) {
  EXPECT_EQ(Ok(service_->GetDiskNumberFromVolumeId(kOnly)), 3u);
  // A volume that is no single partition answers no device number; its extents decide.
  storage_->Fail(common::VolumeDevice(kOnly), ioctl::kStorageGetDeviceNumber, ERROR_INVALID_FUNCTION);
  VOLUME_DISK_EXTENTS one{};
  one.NumberOfDiskExtents = 1;
  one.Extents[0].DiskNumber = 3;
  storage_->Answer(common::VolumeDevice(kOnly), ioctl::kVolumeGetVolumeDiskExtents, testing::Bytes(one));
  EXPECT_EQ(Ok(service_->GetDiskNumberFromVolumeId(kOnly)), 3u);
  std::vector<uint8_t> two(8 + 2 * sizeof(DISK_EXTENT));
  two[0] = 2;
  two[8] = 3;
  two[8 + sizeof(DISK_EXTENT)] = 4;
  storage_->Answer(common::VolumeDevice(kOnly), ioctl::kVolumeGetVolumeDiskExtents, two);
  EXPECT_EQ(service_->GetDiskNumberFromVolumeId(kOnly).status().code(), Code::kFailedPrecondition);
}

// ---- Mounting (SetVolumeMountPoint / DeleteVolumeMountPoint on directories under the roots)

TEST_F(WindowsVolumeBackendTest, MountsOnAnEmptyDirectoryOnceAndFindsItThere) {
  ASSERT_TRUE(service_->MountVolume(kData, target()).ok());
  EXPECT_EQ(storage_->log, (std::vector<std::string>{"mount " + TargetDos() + " " + kData}));
  EXPECT_EQ(Ok(service_->GetVolumeIdFromTargetPath(target())), kData);
  // The same volume again: nothing to do. Another one: refused.
  ASSERT_TRUE(service_->MountVolume(Upper(kData), target()).ok());
  EXPECT_EQ(storage_->log.size(), 1u);
  Status other = service_->MountVolume(kOnly, target());
  EXPECT_EQ(other.code(), Code::kFailedPrecondition);
  EXPECT_NE(other.message().find("already has volume " + kData + " mounted on it"), std::string::npos)
      << other.message();
  // Below the mount point, the closest volume is the mounted one.
  ASSERT_TRUE(::CreateDirectoryA((target() + "\\data").c_str(), nullptr));
  EXPECT_EQ(Ok(service_->GetClosestVolumeIdFromTargetPath(target() + "\\data")), kData);
  EXPECT_EQ(service_->GetVolumeIdFromTargetPath(target() + "\\data").status().code(), Code::kNotFound);
}

TEST_F(WindowsVolumeBackendTest, TargetsAreCheckedAsOnLinux) {
  EXPECT_EQ(service_->MountVolume(kData, kubelet()).code(), Code::kInvalidArgument);  // a root itself
  EXPECT_EQ(service_->MountVolume(kData, base_ + "\\outside").code(), Code::kPermissionDenied);
  EXPECT_EQ(service_->MountVolume(kData, kubelet() + "\\..\\outside").code(), Code::kInvalidArgument);
  EXPECT_EQ(service_->MountVolume(kData, kubelet() + "\\absent").code(), Code::kNotFound);
  ASSERT_TRUE(::CloseHandle(::CreateFileA((kubelet() + "\\file").c_str(), GENERIC_WRITE, 0, nullptr, CREATE_NEW,
                                          FILE_ATTRIBUTE_NORMAL, nullptr)));
  EXPECT_EQ(service_->MountVolume(kData, kubelet() + "\\file").code(), Code::kFailedPrecondition);
  EXPECT_EQ(service_->GetVolumeIdFromTargetPath(base_ + "\\outside").status().code(), Code::kPermissionDenied);
  EXPECT_TRUE(storage_->log.empty());
}

TEST_F(WindowsVolumeBackendTest, VolumesOfTheNodeItselfAreNotMounted) {
  Status system = service_->MountVolume(kSystem, target());
  EXPECT_EQ(system.code(), Code::kFailedPrecondition);
  EXPECT_NE(system.message().find("is mounted at \"C:\\\\\", outside the allowed roots"), std::string::npos)
      << system.message();
  Status esp = service_->MountVolume(kEsp, target());
  EXPECT_EQ(esp.code(), Code::kFailedPrecondition);
  EXPECT_NE(esp.message().find("is an EFI system partition; refusing to mount it"), std::string::npos) << esp.message();
  Status raw = service_->MountVolume(kRaw, target());
  EXPECT_EQ(raw.code(), Code::kFailedPrecondition);
  EXPECT_NE(raw.message().find("is not formatted"), std::string::npos);
  EXPECT_TRUE(storage_->log.empty());
}

TEST_F(WindowsVolumeBackendTest, SetVolumeMountPointRefusalsKeepTheirMeaning) {
  storage_->set_mount_point_error = ERROR_DIR_NOT_EMPTY;
  Status full = service_->MountVolume(kData, target());
  EXPECT_EQ(full.code(), Code::kFailedPrecondition);
  EXPECT_NE(full.message().find("not empty"), std::string::npos);
  storage_->set_mount_point_error = ERROR_CALL_NOT_IMPLEMENTED;  // what Wine answers
  Status wine = service_->MountVolume(kData, target());
  EXPECT_EQ(wine.code(), Code::kUnimplemented);
  EXPECT_NE(wine.message().find("cannot mount volumes on directories (SetVolumeMountPoint)"), std::string::npos)
      << wine.message();
  storage_->set_mount_point_error = ERROR_ACCESS_DENIED;
  EXPECT_EQ(service_->MountVolume(kData, target()).code(), Code::kPermissionDenied);
  EXPECT_EQ(service_->GetVolumeIdFromTargetPath(target()).status().code(), Code::kNotFound);  // nothing stayed
}

TEST_F(WindowsVolumeBackendTest, UnmountFlushesAndRemovesTheMountPointAndIsIdempotent) {
  ASSERT_TRUE(service_->MountVolume(kData, target()).ok());
  storage_->log.clear();
  ASSERT_TRUE(service_->UnmountVolume(kData, target()).ok());
  EXPECT_EQ(storage_->log, (std::vector<std::string>{"flush " + kData, "unmount " + target()}));
  EXPECT_EQ(service_->GetVolumeIdFromTargetPath(target()).status().code(), Code::kNotFound);
  EXPECT_TRUE(storage_->volumes[kData].paths.empty());
  // Nothing mounted there, or no directory at all: done already.
  EXPECT_TRUE(service_->UnmountVolume(kData, target()).ok());
  EXPECT_TRUE(service_->UnmountVolume(kData, kubelet() + "\\absent\\deeper").ok());
  EXPECT_EQ(storage_->log.size(), 2u);
}

TEST_F(WindowsVolumeBackendTest, UnmountLeavesAnotherVolumesMountAndUnmountsAVolumeThatWentAway) {
  ASSERT_TRUE(service_->MountVolume(kData, target()).ok());
  Status other = service_->UnmountVolume(kOnly, target());
  EXPECT_EQ(other.code(), Code::kFailedPrecondition);
  EXPECT_NE(other.message().find("has volume " + kData + " mounted on it, not"), std::string::npos);
  // The disk was detached: its volume is no longer listed, but its mount point is still removed by its id.
  storage_->volumes.erase(kData);
  EXPECT_TRUE(service_->UnmountVolume(kData, target()).ok());
  EXPECT_EQ(storage_->log.back(), "unmount " + target());
}

// ---- File systems

TEST_F(WindowsVolumeBackendTest, FormattedMeansAFileSystemWindowsKnows) {
  EXPECT_TRUE(Ok(service_->IsVolumeFormatted(kData)));
  EXPECT_FALSE(Ok(service_->IsVolumeFormatted(kRaw)));
  storage_->volumes[kData].file_system = {ERROR_ACCESS_DENIED, ""};
  EXPECT_EQ(service_->IsVolumeFormatted(kData).status().code(), Code::kPermissionDenied);
}

TEST_F(WindowsVolumeBackendTest, FormatsAnUnformattedVolumeAsUpstreamDoes) {
  WithStorageApi();
  ASSERT_TRUE(service_->FormatVolume(kRaw).ok());
  auto calls = storage_->wmi.CallsOf("Format");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].path, "MSFT_Volume.ObjectId=\"" + kRaw + "\"");
  EXPECT_EQ(std::get<std::string>(RecordedWmi::Argument(calls[0], "FileSystem")), "NTFS");
  EXPECT_EQ(std::get<std::string>(RecordedWmi::Argument(calls[0], "FileSystemLabel")), "");
  EXPECT_EQ(std::get<bool>(RecordedWmi::Argument(calls[0], "Full")), false);
  EXPECT_EQ(std::get<bool>(RecordedWmi::Argument(calls[0], "Force")), true);
}

TEST_F(WindowsVolumeBackendTest, FormatTakesTheRequestsFileSystemAndParameters) {
  WithStorageApi();
  ASSERT_TRUE(service_
                  ->FormatVolume(
                      kRaw, {"refs", {"AllocationUnitSize=65536", "FileSystemLabel=pvc-1", "SetIntegrityStreams=true"}})
                  .ok());
  auto call = storage_->wmi.CallsOf("Format").at(0);
  EXPECT_EQ(std::get<std::string>(RecordedWmi::Argument(call, "FileSystem")), "ReFS");
  EXPECT_EQ(std::get<int64_t>(RecordedWmi::Argument(call, "AllocationUnitSize")), 65536);
  EXPECT_EQ(std::get<std::string>(RecordedWmi::Argument(call, "FileSystemLabel")), "pvc-1");
  EXPECT_EQ(std::get<bool>(RecordedWmi::Argument(call, "SetIntegrityStreams")), true);
  // Refused before anything is asked of Windows.
  EXPECT_EQ(service_->FormatVolume(kRaw, {"ext4", {}}).code(), Code::kInvalidArgument);
  EXPECT_EQ(service_->FormatVolume(kRaw, {"ntfs", {"Force=false"}}).code(), Code::kInvalidArgument);
  EXPECT_EQ(storage_->wmi.CallsOf("Format").size(), 1u);
}

TEST_F(WindowsVolumeBackendTest, AnUnmountedVolumeIsNeverOverwritten) {
  WithStorageApi();
  ASSERT_TRUE(service_->FormatVolume(kData).ok());  // NTFS already: a retry, untouched
  Status other = service_->FormatVolume(kData, {"refs", {}});
  EXPECT_EQ(other.code(), Code::kFailedPrecondition);
  EXPECT_NE(other.message().find("holds NTFS, not refs"), std::string::npos) << other.message();
  EXPECT_TRUE(storage_->wmi.CallsOf("Format").empty());
}

TEST_F(WindowsVolumeBackendTest, AVolumeMountedUnderTheRootsIsFormattedInPlaceOthersAreRefused) {
  WithStorageApi();
  ASSERT_TRUE(service_->MountVolume(kData, target()).ok());
  ASSERT_TRUE(service_->FormatVolume(kData).ok());  // sig-storage-local-static-provisioner's cleanup
  EXPECT_EQ(storage_->wmi.CallsOf("Format").size(), 1u);
  EXPECT_EQ(Ok(service_->GetVolumeIdFromTargetPath(target())), kData);  // still mounted there
  Status system = service_->FormatVolume(kSystem);
  EXPECT_EQ(system.code(), Code::kFailedPrecondition);
  EXPECT_NE(system.message().find("refusing to format it"), std::string::npos);
  EXPECT_EQ(service_->FormatVolume(kEsp).code(), Code::kFailedPrecondition);
  EXPECT_EQ(storage_->wmi.CallsOf("Format").size(), 1u);
}

TEST_F(WindowsVolumeBackendTest, FormatRefusalsOfWindowsKeepTheirMeaning) {
  WithStorageApi();
  // A system partition, access denied, the disk offline meanwhile, the volume gone meanwhile, a file system this
  // Windows does not make, a cluster size it refuses.
  for (auto [value, code] : {std::pair{42010u, Code::kFailedPrecondition}, std::pair{40001u, Code::kPermissionDenied},
                             std::pair{41003u, Code::kFailedPrecondition}, std::pair{8u, Code::kNotFound},
                             std::pair{43001u, Code::kFailedPrecondition}, std::pair{43000u, Code::kInvalidArgument}}) {
    storage_->wmi.OnMethod(kStorage, "MSFT_Volume", "Format", [value](wmi::Object*, const wmi::Arguments&) {
      return StatusOr<wmi::MethodResult>(testing::Answer(value));
    });
    Status status = service_->FormatVolume(kRaw);
    EXPECT_EQ(status.code(), code) << status.message();
    EXPECT_NE(status.message().find("MSFT_Volume.Format returned " + std::to_string(value)), std::string::npos);
  }
}

// ---- Sizes

TEST_F(WindowsVolumeBackendTest, StatsAreTheVolumesSizeAndWhatIsUsed) {
  auto stats = service_->GetVolumeStats(kData);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->total_bytes, static_cast<int64_t>(10 * kGiB));
  EXPECT_EQ(stats->used_bytes, static_cast<int64_t>(6 * kGiB));
  EXPECT_EQ(service_->GetVolumeStats(kRaw).status().code(), Code::kFailedPrecondition);
}

TEST_F(WindowsVolumeBackendTest, ResizeGrowsThePartitionToWhatWindowsSupports) {
  WithStorageApi();
  ASSERT_TRUE(service_->ResizeVolume(kData, 0).ok());
  auto resize = storage_->wmi.CallsOf("Resize");
  ASSERT_EQ(resize.size(), 1u);
  EXPECT_EQ(resize[0].path, "MSFT_Partition.ObjectId=\"{part-2-2}\"");
  EXPECT_EQ(std::get<std::string>(RecordedWmi::Argument(resize[0], "Size")), std::to_string(20 * kGiB));
  EXPECT_EQ(storage_->wmi.CallsOf("Refresh").size(), 1u);
  // Again: grown already, nothing resized.
  ASSERT_TRUE(service_->ResizeVolume(kData, 0).ok());
  EXPECT_EQ(storage_->wmi.CallsOf("Resize").size(), 1u);
}

TEST_F(WindowsVolumeBackendTest, ResizeNeverShrinksNorGoesBeyondTheDisk) {
  WithStorageApi();
  Status beyond = service_->ResizeVolume(kData, static_cast<int64_t>(21 * kGiB));
  EXPECT_EQ(beyond.code(), Code::kOutOfRange);
  EXPECT_NE(beyond.message().find("can grow to at most " + std::to_string(20 * kGiB)), std::string::npos);
  Status shrink = service_->ResizeVolume(kData, static_cast<int64_t>(5 * kGiB));
  EXPECT_EQ(shrink.code(), Code::kFailedPrecondition);
  EXPECT_NE(shrink.message().find("volumes only grow"), std::string::npos);
  EXPECT_TRUE(service_->ResizeVolume(kData, static_cast<int64_t>(10 * kGiB + 4096)).ok());  // under 1 MiB: skipped
  EXPECT_EQ(service_->ResizeVolume(kData, -1).code(), Code::kInvalidArgument);
  EXPECT_TRUE(storage_->wmi.CallsOf("Resize").empty());
}

TEST_F(WindowsVolumeBackendTest, ResizeTakesTheDecimalNumberOfADiskWithOneVolume) {
  WithStorageApi();
  ASSERT_TRUE(service_->ResizeVolume("3", 0).ok());  // azuredisk's call at the end of every stage
  EXPECT_EQ(storage_->wmi.CallsOf("Resize").at(0).path, "MSFT_Partition.ObjectId=\"{part-3-1}\"");
  Status two = service_->ResizeVolume("2", 0);
  EXPECT_EQ(two.code(), Code::kInvalidArgument);
  EXPECT_NE(two.message().find("disk 2 has 2 volumes"), std::string::npos) << two.message();
  EXPECT_EQ(service_->ResizeVolume("9", 0).code(), Code::kNotFound);
}

TEST_F(WindowsVolumeBackendTest, ResizeRefusalsOfWindowsKeepTheirMeaning) {
  WithStorageApi();
  storage_->wmi.OnMethod(kStorage, "MSFT_Partition", "Resize", [](wmi::Object*, const wmi::Arguments&) {
    return StatusOr<wmi::MethodResult>(testing::Answer(4097));  // size not supported
  });
  EXPECT_EQ(service_->ResizeVolume(kData, 0).code(), Code::kOutOfRange);
  storage_->wmi.OnMethod(kStorage, "MSFT_Partition", "GetSupportedSize", [](wmi::Object*, const wmi::Arguments&) {
    return StatusOr<wmi::MethodResult>(testing::Answer(42009));  // an unknown file system
  });
  EXPECT_EQ(service_->ResizeVolume(kData, 0).code(), Code::kFailedPrecondition);
}

// ---- Caches and what Wine lacks

TEST_F(WindowsVolumeBackendTest, WriteVolumeCacheFlushesTheVolume) {
  ASSERT_TRUE(service_->WriteVolumeCache(kData).ok());
  EXPECT_EQ(storage_->log, (std::vector<std::string>{"flush " + kData}));
  storage_->volumes[kData].flush_error = ERROR_INVALID_FUNCTION;  // what Wine answers
  Status wine = service_->WriteVolumeCache(kData);
  EXPECT_EQ(wine.code(), Code::kUnimplemented);
  EXPECT_NE(wine.message().find("cannot flush a volume"), std::string::npos);
  storage_->volumes[kData].flush_error = ERROR_ACCESS_DENIED;
  EXPECT_EQ(service_->WriteVolumeCache(kData).code(), Code::kPermissionDenied);
}

TEST_F(WindowsVolumeBackendTest, WithoutTheStorageManagementApiFormatAndResizeAreUnimplementedNamingIt) {
  storage_->wmi.AddClass(wmi::kCimV2Namespace, "Win32_Volume");  // Wine: no MSFT_* classes
  for (Status status : {service_->FormatVolume(kRaw), service_->ResizeVolume(kData, 0)}) {
    EXPECT_EQ(status.code(), Code::kUnimplemented) << status.message();
    EXPECT_NE(status.message().find("ROOT\\Microsoft\\Windows\\Storage"), std::string::npos) << status.message();
  }
}

}  // namespace
}  // namespace csi_proxy::volume

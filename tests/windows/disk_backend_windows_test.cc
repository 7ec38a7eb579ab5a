// The disk group's Windows backend (plugins/disk/src/disk_backend_windows.cc) behind its service, against recorded
// answers: IOCTL buffers laid out with Windows' own structures, Win32 errors and Storage Management API return
// values as Microsoft documents them, MSFT_Disk and MSFT_Partition instances as upstream reads them. Written from
// Microsoft's documentation and upstream's code (pkg/os/disk, pkg/wmi); the storage groups have not yet run on a
// Windows node.
#include <windows.h>

#include <gtest/gtest.h>

#include <memory>

#include "disk_backend_windows.h"
#include "disk_service.h"
#include "recorded_storage.h"
#include "storage_answers.h"
#include "storage_ioctl.h"

namespace csi_proxy::disk {
namespace {

using testing::Ok;
using testing::RecordedStorage;
using testing::RecordedWmi;
namespace ioctl = common::ioctl;
namespace msft = testing::msft;
namespace wmi = common::wmi;

constexpr const char* kStorage = wmi::kStorageNamespace;
constexpr const char* kInterface0 =
    "\\\\?\\scsi#disk&ven_msft&prod_virtual_disk#5&1#{53f56307-b6bf-11d0-94f2-00a0c91efb8b}";
constexpr const char* kDrive0 = "\\\\.\\PhysicalDrive0";
constexpr const char* kDrive2 = "\\\\.\\PhysicalDrive2";
constexpr const char* kVolume = "\\\\?\\Volume{6a2f4f6e-0c2b-4d3e-9a51-3c0d2a7d1b01}\\";

std::string String(const wmi::Value& v) {
  return std::holds_alternative<std::string>(v) ? std::get<std::string>(v) : "";
}

class WindowsDiskBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    storage_ = std::make_shared<RecordedStorage>();
    // Disk 0 is listed twice (by SetupAPI and by its DOS name), disk 2 once; CdRom0 is no disk.
    storage_->disk_paths = {kInterface0, kDrive0, kDrive2, "\\\\.\\CdRom0"};
    storage_->Answer(kInterface0, ioctl::kStorageGetDeviceNumber, testing::DeviceNumberAnswer(0));
    storage_->Answer(kDrive0, ioctl::kStorageGetDeviceNumber, testing::DeviceNumberAnswer(0));
    storage_->Answer(kDrive2, ioctl::kStorageGetDeviceNumber, testing::DeviceNumberAnswer(2));
    storage_->Answer("\\\\.\\CdRom0", ioctl::kStorageGetDeviceNumber,
                     testing::DeviceNumberAnswer(0, 0, FILE_DEVICE_CD_ROM));
    // Disk 0: the OS disk, an NAA id, LUN 0 on adapter 0. Disk 2: a data disk at LUN 3 with a vendor id and an
    // EBS-like serial, taken offline.
    Ids(kInterface0,
        testing::DeviceIdAnswer({{StorageIdCodeSetBinary, StorageIdTypeFCPHName, StorageIdAssocDevice,
                                  std::string("\x60\x02\x24\x80\xa1\xb2\xc3\xd4", 8)}}),
        testing::DeviceDescriptorAnswer("", "Msft", "Virtual Disk"));
    storage_->Answer(kInterface0, ioctl::kScsiGetAddress, testing::ScsiAddressAnswer(0, 0, 0, 0));
    storage_->Answer(kInterface0, ioctl::kDiskGetDriveGeometryEx, testing::GeometryAnswer(127ull << 30));
    storage_->Answer(kInterface0, ioctl::kDiskGetDiskAttributes, testing::AttributesAnswer(0));
    Ids(kDrive2,
        testing::DeviceIdAnswer(
            {{StorageIdCodeSetBinary, StorageIdTypeFCPHName, StorageIdAssocPort, "\x01"},
             {StorageIdCodeSetAscii, StorageIdTypeVendorId, StorageIdAssocDevice, "Google  persistent-disk-1"}}),
        testing::DeviceDescriptorAnswer("  vol0123456789abcdef0 "));
    storage_->Answer(kDrive2, ioctl::kScsiGetAddress, testing::ScsiAddressAnswer(1, 0, 0, 3));
    storage_->Answer(kDrive2, ioctl::kDiskGetDriveGeometryEx, testing::GeometryAnswer(10ull << 30));
    storage_->Answer(kDrive2, ioctl::kDiskGetDiskAttributes, testing::AttributesAnswer(ioctl::kDiskAttributeOffline));
    service_ = std::make_unique<DiskService>(MakeWindowsDiskBackend(storage_, options_));
  }

  void Ids(const std::string& path, std::vector<uint8_t> id_descriptor, std::vector<uint8_t> device_descriptor) {
    storage_->Answer(path, ioctl::kStorageQueryProperty, std::move(id_descriptor),
                     ioctl::PropertyQuery(ioctl::kStorageDeviceIdProperty));
    storage_->Answer(path, ioctl::kStorageQueryProperty, std::move(device_descriptor),
                     ioctl::PropertyQuery(ioctl::kStorageDeviceProperty));
  }

  // The Storage Management API of a node: disk 0 partitioned as Windows does (MSR, then data), disk 2 as given.
  // Its methods answer as Microsoft documents success, changing the records as Windows would.
  wmi::Object& WithStorageApi(wmi::Object disk2) {
    auto& records = storage_->wmi;
    records.Add(kStorage, msft::Disk(0, 2));
    records.Add(kStorage, msft::GptPartition(0, 1, msft::kMicrosoftReserved, 16 << 20));
    records.Add(kStorage, msft::GptPartition(0, 2, msft::kBasicData, 126ull << 30));
    records.AddClass(kStorage, "MSFT_StorageSetting");
    records.OnMethod(kStorage, "MSFT_Disk", "Initialize", [](wmi::Object* disk, const wmi::Arguments& in) {
      disk->Set("PartitionStyle", RecordedWmi::Argument({"", "", "", "", in}, "PartitionStyle"));
      return StatusOr<wmi::MethodResult>(testing::Answer(0));
    });
    records.OnMethod(kStorage, "MSFT_Disk", "CreatePartition", [this](wmi::Object* disk, const wmi::Arguments& in) {
      auto number = Ok(disk->GetUint("Number"));
      std::string gpt = String(RecordedWmi::Argument({"", "", "", "", in}, "GptType"));
      storage_->wmi.Add(kStorage, gpt.empty() ? msft::MbrPartition(static_cast<uint32_t>(number), 1, 7, 10ull << 30)
                                              : msft::GptPartition(static_cast<uint32_t>(number), 2, gpt, 10ull << 30,
                                                                   /*offline=*/true));
      return StatusOr<wmi::MethodResult>(testing::Answer(0));
    });
    for (const char* method : {"Refresh", "Online", "Offline"}) {
      records.OnMethod(kStorage, "MSFT_Disk", method, [method](wmi::Object* disk, const wmi::Arguments&) {
        if (std::string(method) != "Refresh") disk->Set("IsOffline", std::string(method) == "Offline");
        return StatusOr<wmi::MethodResult>(testing::Answer(0));
      });
    }
    records.OnMethod(kStorage, "MSFT_Partition", "Online", [](wmi::Object* partition, const wmi::Arguments&) {
      partition->Set("IsOffline", false);
      return StatusOr<wmi::MethodResult>(testing::Answer(0));
    });
    records.OnMethod(
        kStorage, "MSFT_StorageSetting", "UpdateHostStorageCache",
        [](wmi::Object*, const wmi::Arguments&) { return StatusOr<wmi::MethodResult>(testing::Answer(0)); });
    return records.Add(kStorage, std::move(disk2));
  }

  std::vector<std::string> MethodsCalled() const {
    std::vector<std::string> names;
    for (const auto& c : storage_->wmi.calls()) names.push_back(c.class_name + "." + c.method);
    return names;
  }

  DiskBackendOptions options_;
  std::shared_ptr<RecordedStorage> storage_;
  std::unique_ptr<DiskService> service_;
};

// ---- Inventory (IOCTLs)

TEST_F(WindowsDiskBackendTest, ListsEachDiskOnceByItsNumber) {
  auto ids = service_->ListDiskIds();
  ASSERT_TRUE(ids.ok()) << ids.status().message();
  ASSERT_EQ(ids->size(), 2u);
  EXPECT_TRUE(ids->count(0) && ids->count(2));
}

TEST_F(WindowsDiskBackendTest, LocationsAreTheScsiAddressAsMsftDiskLocationShowsIt) {
  storage_->disk_paths.push_back("\\\\.\\PhysicalDrive4");  // NVMe without a SCSI address: left out
  storage_->Answer("\\\\.\\PhysicalDrive4", ioctl::kStorageGetDeviceNumber, testing::DeviceNumberAnswer(4));
  storage_->Fail("\\\\.\\PhysicalDrive4", ioctl::kScsiGetAddress, ERROR_INVALID_FUNCTION);
  auto locations = service_->ListDiskLocations();
  ASSERT_TRUE(locations.ok());
  ASSERT_EQ(locations->size(), 2u);
  const DiskLocation& data = locations->at(2);  // azuredisk matches LUNID with the attach LUN
  EXPECT_EQ(data.adapter, "1");
  EXPECT_EQ(data.bus, "0");
  EXPECT_EQ(data.target, "0");
  EXPECT_EQ(data.lun_id, "3");
  EXPECT_EQ(locations->at(0).lun_id, "0");
}

TEST_F(WindowsDiskBackendTest, IdsAreUpstreamsPage83RuleAndTheDescriptorsSerial) {
  storage_->disk_paths.push_back("\\\\.\\PhysicalDrive5");  // answers neither query: empty ids, still listed
  storage_->Answer("\\\\.\\PhysicalDrive5", ioctl::kStorageGetDeviceNumber, testing::DeviceNumberAnswer(5));
  auto ids = service_->ListDiskIds();
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->at(0).page83, "60022480a1b2c3d4");
  EXPECT_EQ(ids->at(0).serial_number, "");
  EXPECT_EQ(ids->at(2).page83, "Google  persistent-disk-1");       // the port's designator comes first but is skipped
  EXPECT_EQ(ids->at(2).serial_number, "  vol0123456789abcdef0 ");  // untrimmed, as upstream reports it
  EXPECT_EQ(ids->at(5).page83, "");
  EXPECT_EQ(ids->at(5).serial_number, "");
}

TEST_F(WindowsDiskBackendTest, DiskNumberByPage83) {
  EXPECT_EQ(Ok(service_->GetDiskNumberByName("Google  persistent-disk-1")), 2u);
  EXPECT_EQ(service_->GetDiskNumberByName("Google  persistent-disk-9").status().code(), Code::kNotFound);
  EXPECT_EQ(service_->GetDiskNumberByName("").status().code(), Code::kInvalidArgument);
}

TEST_F(WindowsDiskBackendTest, StatsAreTheGeometrysDiskSize) {
  EXPECT_EQ(Ok(service_->GetDiskStats(2)), int64_t{10} << 30);
  auto unknown = service_->GetDiskStats(7);
  EXPECT_EQ(unknown.status().code(), Code::kNotFound);
  EXPECT_EQ(unknown.status().message(), "no disk with number 7");
  storage_->Fail(kDrive2, ioctl::kDiskGetDriveGeometryEx, ERROR_ACCESS_DENIED);
  EXPECT_EQ(service_->GetDiskStats(2).status().code(), Code::kPermissionDenied);
  storage_->Fail(kDrive2, ioctl::kDiskGetDriveGeometryEx, ERROR_NOT_READY);  // a disk that went away meanwhile
  EXPECT_EQ(service_->GetDiskStats(2).status().code(), Code::kInternal);
}

TEST_F(WindowsDiskBackendTest, StateIsTheOfflineAttribute) {
  EXPECT_TRUE(Ok(service_->GetDiskState(0)));
  EXPECT_FALSE(Ok(service_->GetDiskState(2)));
  EXPECT_EQ(service_->GetDiskState(7).status().code(), Code::kNotFound);
}

TEST_F(WindowsDiskBackendTest, StateOfADiskWhoseDriverKeepsNoAttributesIsUnimplemented) {
  storage_->Fail(kDrive2, ioctl::kDiskGetDiskAttributes, ERROR_NOT_SUPPORTED);  // what Wine answers
  auto state = service_->GetDiskState(2);
  EXPECT_EQ(state.status().code(), Code::kUnimplemented);
  EXPECT_NE(state.status().message().find("IOCTL_DISK_GET_DISK_ATTRIBUTES"), std::string::npos);
}

// ---- SetDiskState (MSFT_Disk.Online / Offline)

TEST_F(WindowsDiskBackendTest, SetDiskStateCallsOnlineOrOfflineOnlyWhenTheStateDiffers) {
  WithStorageApi(msft::Disk(2, 2, /*offline=*/true));
  ASSERT_TRUE(service_->SetDiskState(2, false).ok());  // already offline: nothing called
  EXPECT_TRUE(storage_->wmi.calls().empty());
  ASSERT_TRUE(service_->SetDiskState(2, true).ok());
  ASSERT_TRUE(service_->SetDiskState(2, true).ok());
  ASSERT_TRUE(service_->SetDiskState(2, false).ok());
  EXPECT_EQ(MethodsCalled(), (std::vector<std::string>{"MSFT_Disk.Online", "MSFT_Disk.Offline"}));
  EXPECT_EQ(storage_->wmi.calls().front().path, "MSFT_Disk.ObjectId=\"{disk-2}\"");
}

TEST_F(WindowsDiskBackendTest, ADiskWithAMountedVolumeIsNotTakenOffline) {
  WithStorageApi(msft::Disk(2, 2));
  storage_->volumes[kVolume].paths = {"C:\\var\\lib\\kubelet\\plugins\\pd\\globalmount\\"};
  storage_->Answer(common::VolumeDevice(kVolume), ioctl::kStorageGetDeviceNumber, testing::DeviceNumberAnswer(2, 2));
  Status status = service_->SetDiskState(2, false);
  EXPECT_EQ(status.code(), Code::kFailedPrecondition);
  EXPECT_NE(status.message().find("disk 2 is in use: volume " + std::string(kVolume) + " is mounted at"),
            std::string::npos)
      << status.message();
  EXPECT_TRUE(storage_->wmi.calls().empty());
  storage_->volumes[kVolume].paths.clear();  // unmounted: now it goes
  EXPECT_TRUE(service_->SetDiskState(2, false).ok());
}

TEST_F(WindowsDiskBackendTest, SetDiskStateRefusalsOfWindowsKeepTheirMeaning) {
  WithStorageApi(msft::Disk(2, 2, /*offline=*/true));
  storage_->wmi.OnMethod(kStorage, "MSFT_Disk", "Online", [](wmi::Object*, const wmi::Arguments&) {
    return StatusOr<wmi::MethodResult>(testing::Answer(41018));  // managed by Failover Clustering
  });
  Status status = service_->SetDiskState(2, true);
  EXPECT_EQ(status.code(), Code::kFailedPrecondition);
  EXPECT_NE(status.message().find("bringing disk 2 online: MSFT_Disk.Online returned 41018"), std::string::npos)
      << status.message();
  storage_->wmi.OnMethod(kStorage, "MSFT_Disk", "Online", [](wmi::Object*, const wmi::Arguments&) {
    return StatusOr<wmi::MethodResult>(testing::Answer(40001));
  });
  EXPECT_EQ(service_->SetDiskState(2, true).code(), Code::kPermissionDenied);
}

TEST_F(WindowsDiskBackendTest, WithoutTheStorageManagementApiWritesAreUnimplementedNamingIt) {
  // Wine: no MSFT_* classes at all.
  storage_->wmi.AddClass(wmi::kCimV2Namespace, "Win32_DiskDrive");
  for (Status status : {service_->SetDiskState(2, true), service_->PartitionDisk(2), service_->Rescan()}) {
    EXPECT_EQ(status.code(), Code::kUnimplemented) << status.message();
    EXPECT_NE(status.message().find("ROOT\\Microsoft\\Windows\\Storage"), std::string::npos) << status.message();
  }
}

// ---- PartitionDisk (MSFT_Disk.Initialize, CreatePartition; MSFT_Partition.Online)

TEST_F(WindowsDiskBackendTest, ARawDiskGetsAGptWithOneBasicDataPartitionAsUpstreamMakesIt) {
  WithStorageApi(msft::Disk(2, 0));
  storage_->Answer(kDrive2, ioctl::kDiskGetDiskAttributes, testing::AttributesAnswer(0));
  ASSERT_TRUE(service_->PartitionDisk(2).ok());
  EXPECT_EQ(MethodsCalled(), (std::vector<std::string>{"MSFT_Disk.Initialize", "MSFT_Disk.CreatePartition",
                                                       "MSFT_Disk.Refresh", "MSFT_Partition.Online"}));
  const auto& calls = storage_->wmi.calls();
  EXPECT_EQ(std::get<int64_t>(RecordedWmi::Argument(calls[0], "PartitionStyle")), 2);  // GPT
  EXPECT_EQ(std::get<bool>(RecordedWmi::Argument(calls[1], "UseMaximumSize")), true);
  EXPECT_EQ(std::get<bool>(RecordedWmi::Argument(calls[1], "AssignDriveLetter")), false);
  EXPECT_EQ(String(RecordedWmi::Argument(calls[1], "GptType")), msft::kBasicData);
  EXPECT_EQ(calls[3].path, "MSFT_Partition.ObjectId=\"{part-2-2}\"");

  // A retry finds the partition and writes nothing.
  ASSERT_TRUE(service_->PartitionDisk(2).ok());
  EXPECT_EQ(storage_->wmi.calls().size(), 4u);
}

TEST_F(WindowsDiskBackendTest, TheConfiguredPartitionTypeIsUsed) {
  options_.gpt_partition_type = "0fc63daf-8483-4772-8e79-3d69d8477de4";
  service_ = std::make_unique<DiskService>(MakeWindowsDiskBackend(storage_, options_));
  WithStorageApi(msft::Disk(2, 2));
  ASSERT_TRUE(service_->PartitionDisk(2).ok());
  EXPECT_EQ(String(RecordedWmi::Argument(storage_->wmi.CallsOf("CreatePartition").at(0), "GptType")),
            "{0fc63daf-8483-4772-8e79-3d69d8477de4}");
  EXPECT_TRUE(storage_->wmi.CallsOf("Initialize").empty());  // GPT already
}

TEST_F(WindowsDiskBackendTest, ADiskWithADataPartitionIsLeftAlone) {
  WithStorageApi(msft::Disk(2, 2));
  storage_->wmi.Add(kStorage, msft::GptPartition(2, 1, msft::kMicrosoftReserved, 16 << 20));
  storage_->wmi.Add(kStorage, msft::GptPartition(2, 2, msft::kBasicData, 10ull << 30));
  ASSERT_TRUE(service_->PartitionDisk(2).ok());
  EXPECT_TRUE(storage_->wmi.calls().empty());
}

TEST_F(WindowsDiskBackendTest, OnlyAMicrosoftReservedPartitionIsNoDataPartition) {
  WithStorageApi(msft::Disk(2, 2));
  storage_->wmi.Add(kStorage, msft::GptPartition(2, 1, msft::kMicrosoftReserved, 16 << 20));
  ASSERT_TRUE(service_->PartitionDisk(2).ok());
  EXPECT_EQ(storage_->wmi.CallsOf("CreatePartition").size(), 1u);
}

TEST_F(WindowsDiskBackendTest, AnMbrDiskGetsAnIfsPartition) {
  WithStorageApi(msft::Disk(2, 1));
  storage_->wmi.Add(kStorage, msft::MbrPartition(2, 1, 5, 10ull << 30));  // an empty extended partition
  ASSERT_TRUE(service_->PartitionDisk(2).ok());
  const auto created = storage_->wmi.CallsOf("CreatePartition").at(0);
  EXPECT_EQ(std::get<int64_t>(RecordedWmi::Argument(created, "MbrType")), 7);
  EXPECT_TRUE(std::holds_alternative<std::monostate>(RecordedWmi::Argument(created, "GptType")));
}

TEST_F(WindowsDiskBackendTest, AnOfflineDiskIsPartitionedOnlyWhenItNeedsNothing) {
  WithStorageApi(msft::Disk(2, 0, /*offline=*/true));
  Status status = service_->PartitionDisk(2);
  EXPECT_EQ(status.code(), Code::kFailedPrecondition);
  EXPECT_EQ(status.message(), "disk 2 is offline; bring it online with SetDiskState before partitioning it");
  storage_->wmi.Add(kStorage, msft::GptPartition(2, 1, msft::kBasicData, 10ull << 30));
  EXPECT_TRUE(service_->PartitionDisk(2).ok());  // GCE, EBS and vSphere stage again so
  EXPECT_TRUE(storage_->wmi.calls().empty());
}

TEST_F(WindowsDiskBackendTest, ARawDiskHoldingAFileSystemIsNotInitialized) {
  WithStorageApi(msft::Disk(2, 0));
  storage_->volumes[kVolume] = {};
  storage_->Answer(common::VolumeDevice(kVolume), ioctl::kStorageGetDeviceNumber, testing::DeviceNumberAnswer(2, 0));
  Status status = service_->PartitionDisk(2);
  EXPECT_EQ(status.code(), Code::kFailedPrecondition);
  EXPECT_NE(status.message().find("holds a file system on the whole disk"), std::string::npos);
  EXPECT_TRUE(storage_->wmi.calls().empty());
}

TEST_F(WindowsDiskBackendTest, PartitionDiskRefusalsOfWindowsKeepTheirMeaning) {
  WithStorageApi(msft::Disk(2, 0));
  storage_->wmi.OnMethod(kStorage, "MSFT_Disk", "Initialize", [](wmi::Object*, const wmi::Arguments&) {
    return StatusOr<wmi::MethodResult>(testing::Answer(41002));  // read only
  });
  Status status = service_->PartitionDisk(2);
  EXPECT_EQ(status.code(), Code::kFailedPrecondition);
  EXPECT_NE(status.message().find("initializing disk 2: MSFT_Disk.Initialize returned 41002 (The disk is read only)"),
            std::string::npos)
      << status.message();
  EXPECT_TRUE(storage_->wmi.CallsOf("CreatePartition").empty());

  storage_->wmi.OnMethod(kStorage, "MSFT_Disk", "Initialize", [](wmi::Object*, const wmi::Arguments&) {
    return StatusOr<wmi::MethodResult>(testing::Answer(6));  // in use
  });
  EXPECT_EQ(service_->PartitionDisk(2).code(), Code::kFailedPrecondition);
}

TEST_F(WindowsDiskBackendTest, APartitionMadeWithoutItsAccessPathOrADiskInitializedMeanwhileIsSuccess) {
  wmi::Object& disk = WithStorageApi(msft::Disk(2, 0));
  (void)disk;
  storage_->wmi.OnMethod(kStorage, "MSFT_Disk", "Initialize", [](wmi::Object* d, const wmi::Arguments&) {
    d->Set("PartitionStyle", int64_t{2});
    return StatusOr<wmi::MethodResult>(testing::Answer(41001));  // another caller initialized it first
  });
  storage_->wmi.OnMethod(kStorage, "MSFT_Disk", "CreatePartition", [this](wmi::Object*, const wmi::Arguments&) {
    storage_->wmi.Add(kStorage, msft::GptPartition(2, 2, msft::kBasicData, 10ull << 30));
    return StatusOr<wmi::MethodResult>(testing::Answer(42002));  // upstream tolerates it too
  });
  EXPECT_TRUE(service_->PartitionDisk(2).ok());
  EXPECT_EQ(storage_->wmi.CallsOf("Online").size(), 1u);
}

TEST_F(WindowsDiskBackendTest, PartitionDiskOfAnUnknownDiskIsNotFound) {
  WithStorageApi(msft::Disk(2, 0));
  EXPECT_EQ(service_->PartitionDisk(9).code(), Code::kNotFound);
  storage_->wmi.Remove(kStorage, "MSFT_Disk",
                       [](const wmi::Object& d) { return d.GetUint("Number").ok() && *d.GetUint("Number") == 2; });
  Status unlisted = service_->PartitionDisk(2);  // a disk the API does not know yet
  EXPECT_EQ(unlisted.code(), Code::kNotFound);
  EXPECT_NE(unlisted.message().find("Rescan"), std::string::npos);
}

// ---- Rescan (MSFT_StorageSetting.UpdateHostStorageCache)

TEST_F(WindowsDiskBackendTest, RescanUpdatesTheHostStorageCache) {
  WithStorageApi(msft::Disk(2, 2));
  ASSERT_TRUE(service_->Rescan().ok());
  ASSERT_EQ(storage_->wmi.calls().size(), 1u);
  EXPECT_EQ(storage_->wmi.calls()[0].path, "MSFT_StorageSetting");  // a static method
  storage_->wmi.OnMethod(
      kStorage, "MSFT_StorageSetting", "UpdateHostStorageCache",
      [](wmi::Object*, const wmi::Arguments&) { return StatusOr<wmi::MethodResult>(testing::Answer(40001)); });
  EXPECT_EQ(service_->Rescan().code(), Code::kPermissionDenied);
}

}  // namespace
}  // namespace csi_proxy::disk

// The disk service and its Linux backend on real loop devices (and a fabricated sysfs for SCSI, which this
// kernel lacks), called directly without gRPC.
#include <gtest/gtest.h>
#include <linux/blkpg.h>
#include <sys/ioctl.h>
#include <sys/mount.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>
#include <vector>

#include "block_device_scan_linux.h"
#include "block_probe_linux.h"
#include "disk_backend_linux.h"
#include "disk_service.h"
#include "fake_sysfs.h"
#include "loop_device.h"
#include "run_program.h"
#include "unique_fd_linux.h"

namespace csi_proxy::disk {
namespace {

using testing::LoopDevice;
using testing::TempDir;

constexpr uint64_t kMiB = 1 << 20;
const std::string kBasicDataGuid = "ebd0a0a2-b9e5-4433-87c0-68b6b72699c7";

class DiskServiceTest : public ::testing::Test {
 protected:
  void SetUp() override { CSI_PROXY_SKIP_WITHOUT_LOOP_DEVICES(); }

  std::vector<common::BlockDevice> KernelPartitions(const LoopDevice& loop) {
    auto disk = devices_.DiskByName(loop.name());
    EXPECT_TRUE(disk.ok());
    auto parts = devices_.PartitionsOf(*disk);
    EXPECT_TRUE(parts.ok());
    return *parts;
  }

  void MakeFilesystem(const std::string& device) {
    auto mkfs = testing::SystemProgram("mkfs.ext4");
    ASSERT_FALSE(mkfs.empty()) << "needs mkfs.ext4";
    auto status = common::RunProgramChecked({mkfs, "-q", "-F", device});
    ASSERT_TRUE(status.ok()) << status.message();
  }

  // A backend as the disk group builds it, with its [host] state_dir in a private directory.
  LinuxDiskOptions Options() const { return LinuxDiskOptions{.state_dir = state_.path()}; }

  TempDir state_;
  DiskService service_{std::make_unique<LinuxDiskBackend>(Options())};
  common::BlockDevices devices_;
};

TEST_F(DiskServiceTest, GetDiskStatsReportsTheWholeDiskSize) {
  LoopDevice loop(256 * kMiB);
  auto size = service_.GetDiskStats(loop.DiskNumber());
  ASSERT_TRUE(size.ok()) << size.status().message();
  EXPECT_EQ(*size, static_cast<int64_t>(256 * kMiB));
}

TEST_F(DiskServiceTest, GetDiskStatsSeesAGrownDiskAfterRescan) {
  LoopDevice loop(64 * kMiB);
  loop.Grow(96 * kMiB);
  ASSERT_TRUE(service_.Rescan().ok());
  auto size = service_.GetDiskStats(loop.DiskNumber());
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(*size, static_cast<int64_t>(96 * kMiB));
}

TEST_F(DiskServiceTest, UnknownDiskNumbersAreNotFound) {
  EXPECT_EQ(service_.GetDiskStats(0).status().code(), Code::kNotFound);
  EXPECT_EQ(service_.PartitionDisk(UINT32_MAX).code(), Code::kNotFound);
  EXPECT_EQ(service_.GetDiskState(UINT32_MAX - 1).status().code(), Code::kNotFound);
  EXPECT_EQ(service_.SetDiskState(UINT32_MAX - 1, true).code(), Code::kNotFound);
}

TEST_F(DiskServiceTest, PartitionRawDiskCreatesOneGptPartitionOverTheDisk) {
  LoopDevice loop(128 * kMiB);
  auto status = service_.PartitionDisk(loop.DiskNumber());
  ASSERT_TRUE(status.ok()) << status.message();

  auto sig = common::ProbeSignatures(loop.path());
  ASSERT_TRUE(sig.ok());
  EXPECT_EQ(sig->pt_type, "gpt");
  auto entries = common::ReadPartitionEntries(loop.path());
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 1u);
  EXPECT_EQ((*entries)[0].type, kBasicDataGuid);

  auto parts = KernelPartitions(loop);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].path, loop.PartitionPath(1));
  EXPECT_EQ(parts[0].start_bytes, 1 * kMiB);   // 1 MiB aligned
  EXPECT_GE(parts[0].size_bytes, 126 * kMiB);  // all but the GPT areas
  struct stat st {};
  ASSERT_EQ(stat(loop.PartitionPath(1).c_str(), &st), 0) << "device node of the new partition";
  EXPECT_TRUE(S_ISBLK(st.st_mode));
}

TEST_F(DiskServiceTest, PartitionDiskTwiceChangesNothingTheSecondTime) {
  LoopDevice loop(64 * kMiB);
  ASSERT_TRUE(service_.PartitionDisk(loop.DiskNumber()).ok());
  const std::string table_before = loop.ReadAt(0, 34 * 512);
  auto status = service_.PartitionDisk(loop.DiskNumber());
  EXPECT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(loop.ReadAt(0, 34 * 512), table_before);
  EXPECT_EQ(KernelPartitions(loop).size(), 1u);
}

TEST_F(DiskServiceTest, PartitionDiskOnAPartitionedDiskWithAMountedVolumeSucceedsWithoutTouchingIt) {
  LoopDevice loop(64 * kMiB);
  ASSERT_TRUE(service_.PartitionDisk(loop.DiskNumber()).ok());
  MakeFilesystem(loop.PartitionPath(1));
  TempDir dir;
  std::string mnt = dir.MakeDir("mnt");
  ASSERT_EQ(mount(loop.PartitionPath(1).c_str(), mnt.c_str(), "ext4", 0, nullptr), 0);
  EXPECT_TRUE(service_.PartitionDisk(loop.DiskNumber()).ok());  // a retried NodeStage does this
}

TEST_F(DiskServiceTest, PartitionDiskRefusesAFilesystemOnTheWholeDiskAndKeepsIt) {
  LoopDevice loop(64 * kMiB);
  MakeFilesystem(loop.path());
  auto before = common::ProbeSignatures(loop.path());
  ASSERT_TRUE(before.ok());
  auto status = service_.PartitionDisk(loop.DiskNumber());
  EXPECT_EQ(status.code(), Code::kFailedPrecondition);
  EXPECT_NE(status.message().find("filesystem of type ext4"), std::string::npos) << status.message();
  auto after = common::ProbeSignatures(loop.path());
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->fs_type, "ext4");
  EXPECT_EQ(after->uuid, before->uuid);
  EXPECT_TRUE(after->pt_type.empty());
}

TEST_F(DiskServiceTest, PartitionDiskRefusesAMountedWholeDiskAndItsDataSurvives) {
  LoopDevice loop(64 * kMiB);
  MakeFilesystem(loop.path());
  TempDir dir;
  std::string mnt = dir.MakeDir("mnt");
  ASSERT_EQ(mount(loop.path().c_str(), mnt.c_str(), "ext4", 0, nullptr), 0);
  std::ofstream(mnt + "/precious.txt") << "keep me";
  auto status = service_.PartitionDisk(loop.DiskNumber());
  EXPECT_EQ(status.code(), Code::kFailedPrecondition);
  EXPECT_NE(status.message().find("mounted at " + mnt), std::string::npos) << status.message();
  std::string content;
  std::getline(std::ifstream(mnt + "/precious.txt"), content);
  EXPECT_EQ(content, "keep me");
  ASSERT_EQ(umount(mnt.c_str()), 0);
  auto sig = common::ProbeSignatures(loop.path());
  ASSERT_TRUE(sig.ok());
  EXPECT_EQ(sig->fs_type, "ext4");
}

TEST_F(DiskServiceTest, PartitionDiskSaysWhenTheKernelCannotShowPartitions) {
  LoopDevice loop(64 * kMiB, /*partscan=*/false);
  auto status = service_.PartitionDisk(loop.DiskNumber());
  EXPECT_EQ(status.code(), Code::kFailedPrecondition);
  EXPECT_NE(status.message().find("partition"), std::string::npos) << status.message();
  EXPECT_EQ(loop.ReadAt(0, 34 * 512), std::string(34 * 512, '\0')) << "nothing may be written";
}

TEST_F(DiskServiceTest, ConcurrentPartitionDiskCallsOnOneDiskMakeOnePartition) {
  LoopDevice loop(64 * kMiB);
  std::vector<Status> results(4);
  std::vector<std::thread> threads;
  for (auto& r : results) threads.emplace_back([&] { r = service_.PartitionDisk(loop.DiskNumber()); });
  for (auto& t : threads) t.join();
  for (const auto& r : results) EXPECT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(KernelPartitions(loop).size(), 1u);
  auto entries = common::ReadPartitionEntries(loop.path());
  ASSERT_TRUE(entries.ok());
  EXPECT_EQ(entries->size(), 1u);
}

TEST_F(DiskServiceTest, SeveralDisksArePartitionedInParallel) {
  std::vector<std::unique_ptr<LoopDevice>> loops;
  for (int i = 0; i < 3; ++i) loops.push_back(std::make_unique<LoopDevice>(64 * kMiB));
  std::vector<Status> results(loops.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < loops.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = service_.PartitionDisk(loops[i]->DiskNumber()); });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < loops.size(); ++i) {
    EXPECT_TRUE(results[i].ok()) << results[i].message();
    EXPECT_EQ(KernelPartitions(*loops[i]).size(), 1u);
  }
}

TEST_F(DiskServiceTest, RescanRestoresPartitionsTheKernelForgot) {
  LoopDevice loop(64 * kMiB);
  ASSERT_TRUE(service_.PartitionDisk(loop.DiskNumber()).ok());
  {
    struct blkpg_partition part {};
    part.pno = 1;
    struct blkpg_ioctl_arg arg {
      BLKPG_DEL_PARTITION, 0, sizeof part, &part
    };
    common::UniqueFd fd(open(loop.path().c_str(), O_RDONLY | O_CLOEXEC));
    ASSERT_EQ(ioctl(fd.get(), BLKPG, &arg), 0) << strerror(errno);
  }
  ASSERT_TRUE(KernelPartitions(loop).empty());
  ASSERT_TRUE(service_.Rescan().ok());
  auto parts = KernelPartitions(loop);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].partition_number, 1u);
}

// Issue 22: GCE PD, EBS and vSphere end every unstage with SetDiskState(offline), on NVMe, virtio and loop disks
// too. The kernel has no offline state for those, so the host keeps it.
TEST_F(DiskServiceTest, ALoopDiskGoesOfflineAndOnlineAndTheStateSurvivesARestart) {
  LoopDevice loop(64 * kMiB);
  EXPECT_TRUE(*service_.GetDiskState(loop.DiskNumber()));
  EXPECT_TRUE(service_.SetDiskState(loop.DiskNumber(), true).ok()) << "online already: nothing to do";

  auto status = service_.SetDiskState(loop.DiskNumber(), false);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_FALSE(*service_.GetDiskState(loop.DiskNumber()));
  EXPECT_TRUE(service_.SetDiskState(loop.DiskNumber(), false).ok()) << "offline already: nothing to do";
  {
    DiskService restarted(std::make_unique<LinuxDiskBackend>(Options()));  // the next run of the proxy
    EXPECT_FALSE(*restarted.GetDiskState(loop.DiskNumber()));
  }
  DiskService without_state(std::make_unique<LinuxDiskBackend>());  // another state_dir knows nothing of it
  EXPECT_TRUE(*without_state.GetDiskState(loop.DiskNumber()));

  status = service_.SetDiskState(loop.DiskNumber(), true);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_TRUE(*service_.GetDiskState(loop.DiskNumber()));
  DiskService restarted(std::make_unique<LinuxDiskBackend>(Options()));
  EXPECT_TRUE(*restarted.GetDiskState(loop.DiskNumber()));
}

TEST_F(DiskServiceTest, TakingADiskOfflineWritesItsCachedDataToTheDevice) {
  LoopDevice loop(64 * kMiB);
  {
    common::UniqueFd fd(open(loop.path().c_str(), O_WRONLY | O_CLOEXEC));  // through the page cache, no fsync
    const std::string data = "written before going offline";
    ASSERT_EQ(pwrite(fd.get(), data.data(), data.size(), 4096), static_cast<ssize_t>(data.size()));
  }
  ASSERT_TRUE(service_.SetDiskState(loop.DiskNumber(), false).ok());
  EXPECT_EQ(loop.ReadBackingFile(4096, 28), "written before going offline");
}

TEST_F(DiskServiceTest, AnOfflineDiskIsNotPartitionedButAPartitionedOneNeedsNothing) {
  LoopDevice raw(64 * kMiB);
  ASSERT_TRUE(service_.SetDiskState(raw.DiskNumber(), false).ok());
  auto status = service_.PartitionDisk(raw.DiskNumber());
  EXPECT_EQ(status.code(), Code::kFailedPrecondition);
  EXPECT_NE(status.message().find("offline (taken offline with SetDiskState)"), std::string::npos) << status.message();
  EXPECT_TRUE(KernelPartitions(raw).empty());
  EXPECT_EQ(raw.ReadAt(512, 8), std::string(8, '\0')) << "no GPT header was written";
  ASSERT_TRUE(service_.SetDiskState(raw.DiskNumber(), true).ok());
  ASSERT_TRUE(service_.PartitionDisk(raw.DiskNumber()).ok());
  EXPECT_EQ(KernelPartitions(raw).size(), 1u);

  // GCE, EBS and vSphere call PartitionDisk before SetDiskState(online) when they stage a disk again.
  ASSERT_TRUE(service_.SetDiskState(raw.DiskNumber(), false).ok());
  status = service_.PartitionDisk(raw.DiskNumber());
  EXPECT_TRUE(status.ok()) << status.message();
}

TEST_F(DiskServiceTest, ADiskInUseCannotGoOffline) {
  LoopDevice loop(64 * kMiB);
  ASSERT_TRUE(service_.PartitionDisk(loop.DiskNumber()).ok());
  MakeFilesystem(loop.PartitionPath(1));
  TempDir mnt;
  ASSERT_EQ(mount(loop.PartitionPath(1).c_str(), mnt.path().c_str(), "ext4", 0, nullptr), 0) << strerror(errno);
  auto status = service_.SetDiskState(loop.DiskNumber(), false);
  umount2(mnt.path().c_str(), MNT_DETACH);
  EXPECT_EQ(status.code(), Code::kFailedPrecondition);
  EXPECT_NE(status.message().find("is mounted at"), std::string::npos) << status.message();
  EXPECT_TRUE(*service_.GetDiskState(loop.DiskNumber()));
}

TEST_F(DiskServiceTest, WithoutAStateDirOnlyDisksWithAKernelStateGoOffline) {
  LoopDevice loop(64 * kMiB);
  DiskService without_state(std::make_unique<LinuxDiskBackend>());
  auto status = without_state.SetDiskState(loop.DiskNumber(), false);
  EXPECT_EQ(status.code(), Code::kFailedPrecondition);
  EXPECT_NE(status.message().find("loop device"), std::string::npos) << status.message();
  EXPECT_TRUE(*service_.GetDiskState(loop.DiskNumber()));
}

TEST_F(DiskServiceTest, ListDiskIdsListsLoopDisksWithoutIdentifiersAndLocationsLeaveThemOut) {
  LoopDevice loop(64 * kMiB);
  auto ids = service_.ListDiskIds();
  ASSERT_TRUE(ids.ok());
  ASSERT_EQ(ids->count(loop.DiskNumber()), 1u);
  EXPECT_EQ(ids->at(loop.DiskNumber()).page83, "");
  EXPECT_EQ(ids->at(loop.DiskNumber()).serial_number, "");
  auto locations = service_.ListDiskLocations();
  ASSERT_TRUE(locations.ok());
  EXPECT_EQ(locations->count(loop.DiskNumber()), 0u);
}

// ---- SCSI through a fabricated sysfs ---------------------------------------------------------------------------

class FakeScsiDiskTest : public ::testing::Test {
 protected:
  TempDir state_;  // first: the backend below keeps its state here
  FakeScsiDiskTest()
      : fake_("sdz", "7:0:3:12", 4242, testing::VpdPage(0x83, testing::Designator(2, 0, 1, "LIO-ORG disk42  ")),
              testing::VpdPage(0x80, "abc-123")),
        service_(
            std::make_unique<LinuxDiskBackend>(LinuxDiskOptions{.state_dir = state_.path(), .roots = fake_.roots()})) {}

  testing::FakeScsiDisk fake_;
  DiskService service_;
};

TEST_F(FakeScsiDiskTest, ListDiskLocationsGivesAdapterBusTargetLun) {
  auto locations = service_.ListDiskLocations();
  ASSERT_TRUE(locations.ok()) << locations.status().message();
  ASSERT_EQ(locations->count(4242), 1u);
  const auto& loc = locations->at(4242);
  EXPECT_EQ(loc.adapter, "7");
  EXPECT_EQ(loc.bus, "0");
  EXPECT_EQ(loc.target, "3");
  EXPECT_EQ(loc.lun_id, "12");
}

TEST_F(FakeScsiDiskTest, ListDiskIdsGivesPage83AndSerial) {
  auto ids = service_.ListDiskIds();
  ASSERT_TRUE(ids.ok());
  ASSERT_EQ(ids->count(4242), 1u);
  EXPECT_EQ(ids->at(4242).page83, "LIO-ORG disk42  ");
  EXPECT_EQ(ids->at(4242).serial_number, "abc-123");
  auto number = service_.GetDiskNumberByName("LIO-ORG disk42  ");
  ASSERT_TRUE(number.ok());
  EXPECT_EQ(*number, 4242u);
  EXPECT_EQ(service_.GetDiskNumberByName("LIO-ORG disk42").status().code(), Code::kNotFound);
}

TEST_F(FakeScsiDiskTest, SetDiskStateWritesTheScsiDeviceState) {
  ASSERT_TRUE(service_.SetDiskState(4242, false).ok());
  EXPECT_EQ(fake_.State(), "offline");
  EXPECT_FALSE(*service_.GetDiskState(4242));
  EXPECT_TRUE(std::filesystem::is_empty(state_.path())) << "the kernel keeps a SCSI disk's state, not the host";
  ASSERT_TRUE(service_.SetDiskState(4242, false).ok());  // already offline
  ASSERT_TRUE(service_.SetDiskState(4242, true).ok());
  EXPECT_EQ(fake_.State(), "running");
  EXPECT_TRUE(*service_.GetDiskState(4242));
}

TEST_F(FakeScsiDiskTest, GetDiskStateReadsStatesSetElsewhere) {
  fake_.SetState("transport-offline");
  EXPECT_FALSE(*service_.GetDiskState(4242));
  fake_.SetState("blocked");
  EXPECT_TRUE(*service_.GetDiskState(4242));
}

TEST_F(FakeScsiDiskTest, RescanScansScsiHostsAndDisks) {
  ASSERT_TRUE(service_.Rescan().ok());
  EXPECT_EQ(fake_.HostScanWrites(), "- - -");
  EXPECT_EQ(fake_.RescanWrites(), "1");
}

TEST(DiskService, ParseDiskIdAcceptsOnlyDecimalNumbers) {
  EXPECT_EQ(*DiskService::ParseDiskId("7"), 7u);
  EXPECT_EQ(*DiskService::ParseDiskId("4294967295"), UINT32_MAX);
  EXPECT_EQ(DiskService::ParseDiskId("").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(DiskService::ParseDiskId("-1").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(DiskService::ParseDiskId("4294967296").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(DiskService::ParseDiskId("1e3").status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace csi_proxy::disk

// The volume service and its Linux backend on real loop devices, called directly without gRPC: upstream's
// NodeStage/expand sequence for ext4 and xfs, idempotency, the refusals that keep data safe, path confinement
// and concurrency.
#include "volume_service.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/blkpg.h>
#include <linux/fs.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>
#include <vector>

#include "block_device_scan_linux.h"
#include "block_inventory_linux.h"
#include "block_probe_linux.h"
#include "disk_backend_linux.h"
#include "disk_offline_linux.h"
#include "disk_service.h"
#include "fake_sysfs.h"
#include "loop_device.h"
#include "path_policy.h"
#include "run_program.h"
#include "volume_backend_linux.h"
#include "volume_mounts_linux.h"

namespace csi_proxy::volume {
namespace {

using testing::LoopDevice;
using testing::TempDir;

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kGiB = 1 << 30;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class VolumeServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CSI_PROXY_SKIP_WITHOUT_LOOP_DEVICES();
    for (const char* program : {"mkfs.ext4", "resize2fs"}) {
      if (testing::SystemProgram(program).empty()) GTEST_SKIP() << "needs " << program;
    }
    kubelet_ = dir_.MakeDir("kubelet");
    Configure("ext4");
  }

  void Configure(const std::string& fs_type) {
    auto policy = common::PathPolicy::Create(kubelet_, {});
    ASSERT_TRUE(policy.ok()) << policy.status().message();
    service_.reset();
    service_ = std::make_unique<VolumeService>(
        std::make_unique<LinuxVolumeBackend>(*policy, LinuxVolumeOptions{.default_fs_type = fs_type,
                                                                         .scratch_dir = dir_.Sub("scratch"),
                                                                         .state_dir = dir_.Sub("state")}),
        *policy);
  }

  // A loop disk partitioned through the disk service; returns the volume ID of its partition.
  std::string StageDisk(LoopDevice& loop) {
    auto status = disks_.PartitionDisk(loop.DiskNumber());
    EXPECT_TRUE(status.ok()) << status.message();
    auto volumes = service_->ListVolumesOnDisk(loop.DiskNumber(), 0);
    EXPECT_TRUE(volumes.ok()) << volumes.status().message();
    return volumes.ok() && volumes->size() == 1 ? volumes->front() : std::string();
  }

  std::string FormattedVolume(LoopDevice& loop) {
    std::string id = StageDisk(loop);
    auto status = service_->FormatVolume(id);
    EXPECT_TRUE(status.ok()) << status.message();
    return id;
  }

  uint64_t PartitionSize(const std::string& id) {
    auto device = common::BlockDevices().ResolveVolumeId(id);
    EXPECT_TRUE(device.ok());
    return device.ok() ? device->size_bytes : 0;
  }

  // Upstream's check is "within 20 MiB below"; ext4 and xfs keep more than that for their metadata on a
  // gigabyte, so here the filesystem size must be within 10% below the partition size.
  static void ExpectSizeAround(int64_t actual, uint64_t expected) {
    EXPECT_LE(actual, static_cast<int64_t>(expected));
    EXPECT_GE(actual, static_cast<int64_t>(expected * 9 / 10)) << "expected about " << expected;
  }

  // The full sequence a CSI driver runs (upstream's volume v1/v2alpha1 integration test) for one filesystem.
  void RunUpstreamSequence(const std::string& fs_type);
  // Formats, mounts, grows the disk and expands the mounted volume.
  void GrowMountedVolume(const std::string& fs_type);

  TempDir dir_;
  std::string kubelet_;
  disk::DiskService disks_{std::make_unique<disk::LinuxDiskBackend>(
      disk::LinuxDiskOptions{.state_dir = dir_.Sub("state")})};  // shares state_dir
  std::unique_ptr<VolumeService> service_;
};

void VolumeServiceTest::RunUpstreamSequence(const std::string& fs_type) {
  Configure(fs_type);
  LoopDevice loop(1 * kGiB);
  ASSERT_TRUE(disks_.PartitionDisk(loop.DiskNumber()).ok());

  auto volumes = service_->ListVolumesOnDisk(loop.DiskNumber(), 0);
  ASSERT_TRUE(volumes.ok()) << volumes.status().message();
  ASSERT_EQ(volumes->size(), 1u);
  const std::string id = volumes->front();
  EXPECT_EQ(id, loop.PartitionPath(1));

  auto formatted = service_->IsVolumeFormatted(id);
  ASSERT_TRUE(formatted.ok());
  EXPECT_FALSE(*formatted);
  auto status = service_->FormatVolume(id);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_TRUE(*service_->IsVolumeFormatted(id));
  auto sig = common::ProbeSignatures(id);
  ASSERT_TRUE(sig.ok());
  EXPECT_EQ(sig->fs_type, fs_type);

  auto stats = service_->GetVolumeStats(id);
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  ExpectSizeAround(stats->total_bytes, PartitionSize(id));
  EXPECT_GT(stats->used_bytes, 0);
  EXPECT_LT(stats->used_bytes, stats->total_bytes);

  // The disk grows (upstream: Resize-VHD), the node rescans, the driver expands to the maximum.
  loop.Grow(2 * kGiB);
  ASSERT_TRUE(disks_.Rescan().ok());
  status = service_->ResizeVolume(id, 0);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_GE(PartitionSize(id), 2 * kGiB - 2 * kMiB);
  auto grown = service_->GetVolumeStats(id);
  ASSERT_TRUE(grown.ok()) << grown.status().message();
  ExpectSizeAround(grown->total_bytes, PartitionSize(id));
  EXPECT_GT(grown->total_bytes, stats->total_bytes);

  auto number = service_->GetDiskNumberFromVolumeId(id);
  ASSERT_TRUE(number.ok());
  EXPECT_EQ(*number, loop.DiskNumber());
  auto disk_size = disks_.GetDiskStats(*number);
  ASSERT_TRUE(disk_size.ok());
  EXPECT_EQ(*disk_size, static_cast<int64_t>(2 * kGiB));

  const std::string mnt = dir_.MakeDir("kubelet/plugins/test.csi.io/mount");
  status = service_->MountVolume(id, mnt);
  ASSERT_TRUE(status.ok()) << status.message();
  std::ofstream(mnt + "/hello.txt") << "hello from " << fs_type;
  EXPECT_EQ(ReadFile(mnt + "/hello.txt"), "hello from " + fs_type);
  EXPECT_TRUE(service_->WriteVolumeCache(id).ok());

  auto by_target = service_->GetVolumeIdFromTargetPath(mnt);
  ASSERT_TRUE(by_target.ok()) << by_target.status().message();
  EXPECT_EQ(*by_target, id);
  std::filesystem::create_directories(mnt + "/foo/bar");
  auto closest = service_->GetClosestVolumeIdFromTargetPath(mnt + "/foo/bar");
  ASSERT_TRUE(closest.ok()) << closest.status().message();
  EXPECT_EQ(*closest, id);
  const std::string link = kubelet_ + "/pod-volume-link";
  std::filesystem::create_directory_symlink(mnt, link);
  closest = service_->GetClosestVolumeIdFromTargetPath(link);
  ASSERT_TRUE(closest.ok()) << closest.status().message();
  EXPECT_EQ(*closest, id);
  auto mounted_stats = service_->GetVolumeStats(id);
  ASSERT_TRUE(mounted_stats.ok());
  EXPECT_EQ(mounted_stats->total_bytes, grown->total_bytes);

  status = service_->UnmountVolume(id, mnt);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_FALSE(std::filesystem::exists(mnt + "/hello.txt"));
  EXPECT_TRUE(std::filesystem::is_directory(mnt)) << "the directory stays";
  EXPECT_EQ(service_->GetVolumeIdFromTargetPath(mnt).status().code(), Code::kNotFound);
}

TEST_F(VolumeServiceTest, UpstreamSequenceWithExt4) { RunUpstreamSequence("ext4"); }

TEST_F(VolumeServiceTest, UpstreamSequenceWithXfs) {
  if (testing::SystemProgram("mkfs.xfs").empty() || testing::SystemProgram("xfs_growfs").empty()) {
    GTEST_SKIP() << "needs xfsprogs";
  }
  RunUpstreamSequence("xfs");
}

TEST_F(VolumeServiceTest, TheClosestVolumeOfAnUnmountedDirectoryIsTheOneHoldingIt) {
  const std::string dir = dir_.MakeDir("kubelet/unmounted");
  struct stat st {};
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  auto holder = common::BlockDevices().DeviceByDevno(st.st_dev);
  auto closest = service_->GetClosestVolumeIdFromTargetPath(dir);
  if (holder.ok()) {
    ASSERT_TRUE(closest.ok()) << closest.status().message();
    EXPECT_EQ(*closest, holder->path);
  } else {
    // /tmp is on a filesystem without a block device (tmpfs, overlay): walking out may still find one.
    EXPECT_TRUE(closest.ok() || closest.status().code() == Code::kNotFound);
  }
  EXPECT_EQ(service_->GetVolumeIdFromTargetPath(dir).status().code(), Code::kNotFound);
}

// Whether this process may resize ext4 online (the kernel asks for CAP_SYS_RESOURCE).
bool HasCapSysResource() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("CapEff:", 0) == 0) return (std::stoull(line.substr(7), nullptr, 16) >> 24) & 1;
  }
  return false;
}

void VolumeServiceTest::GrowMountedVolume(const std::string& fs_type) {
  Configure(fs_type);
  LoopDevice loop(512 * kMiB);
  const std::string id = FormattedVolume(loop);
  const std::string mnt = dir_.MakeDir("kubelet/online");
  ASSERT_TRUE(service_->MountVolume(id, mnt).ok());
  std::ofstream(mnt + "/data") << "survives";
  loop.Grow(1 * kGiB);
  auto status = service_->ResizeVolume(id, 0);
  ASSERT_TRUE(status.ok()) << status.message();
  auto stats = service_->GetVolumeStats(id);
  ASSERT_TRUE(stats.ok());
  ExpectSizeAround(stats->total_bytes, PartitionSize(id));
  EXPECT_GT(PartitionSize(id), 1000 * kMiB);
  EXPECT_EQ(ReadFile(mnt + "/data"), "survives");
}

TEST_F(VolumeServiceTest, ResizeMountedExt4VolumeGrowsItOnline) {
  if (!HasCapSysResource()) GTEST_SKIP() << "needs CAP_SYS_RESOURCE (online ext4 resize)";
  GrowMountedVolume("ext4");
}

TEST_F(VolumeServiceTest, ResizeMountedXfsVolumeGrowsItOnline) {
  if (testing::SystemProgram("mkfs.xfs").empty()) GTEST_SKIP() << "needs xfsprogs";
  GrowMountedVolume("xfs");
}

TEST_F(VolumeServiceTest, OnlineExt4GrowthWithoutCapSysResourceIsRefusedBeforeThePartitionChanges) {
  if (HasCapSysResource()) GTEST_SKIP() << "only meaningful without CAP_SYS_RESOURCE";
  LoopDevice loop(256 * kMiB);
  const std::string id = FormattedVolume(loop);
  ASSERT_TRUE(service_->MountVolume(id, dir_.MakeDir("kubelet/nocap")).ok());
  const uint64_t size = PartitionSize(id);
  loop.Grow(512 * kMiB);
  auto status = service_->ResizeVolume(id, 0);
  EXPECT_EQ(status.code(), Code::kFailedPrecondition);
  EXPECT_NE(status.message().find("CAP_SYS_RESOURCE"), std::string::npos) << status.message();
  EXPECT_EQ(PartitionSize(id), size);
}

TEST_F(VolumeServiceTest, ResizeOfAnExt4VolumeThatWasMountedBeforeChecksItAndGrowsItOffline) {
  LoopDevice loop(256 * kMiB);
  const std::string id = FormattedVolume(loop);
  const std::string mnt = dir_.MakeDir("kubelet/before");
  ASSERT_TRUE(service_->MountVolume(id, mnt).ok());
  std::ofstream(mnt + "/data") << "survives";
  ASSERT_TRUE(service_->UnmountVolume(id, mnt).ok());
  loop.Grow(512 * kMiB);
  auto status = service_->ResizeVolume(id, 0);
  ASSERT_TRUE(status.ok()) << status.message();
  auto stats = service_->GetVolumeStats(id);
  ASSERT_TRUE(stats.ok());
  ExpectSizeAround(stats->total_bytes, PartitionSize(id));
  ASSERT_TRUE(service_->MountVolume(id, mnt).ok());
  EXPECT_EQ(ReadFile(mnt + "/data"), "survives");
}

TEST_F(VolumeServiceTest, ResizeToAGivenSizeGrowsThePartitionToThatSize) {
  LoopDevice loop(256 * kMiB);
  const std::string id = FormattedVolume(loop);
  loop.Grow(512 * kMiB);
  auto status = service_->ResizeVolume(id, 384 * kMiB);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(PartitionSize(id), 384 * kMiB);
  auto entries = common::ReadPartitionEntries(loop.path());
  ASSERT_TRUE(entries.ok());
  EXPECT_EQ(entries->front().size_bytes, 384 * kMiB) << "the on-disk table agrees with the kernel";
  EXPECT_EQ(entries->front().start_bytes, 1 * kMiB) << "the start stays";
  EXPECT_EQ(loop.ReadAt(512 * kMiB - 512, 8), "EFI PART") << "the backup GPT header moved to the new end";
}

TEST_F(VolumeServiceTest, ResizeOfAnUnformattedVolumeGrowsOnlyThePartition) {
  LoopDevice loop(128 * kMiB);
  const std::string id = StageDisk(loop);
  loop.Grow(256 * kMiB);
  auto status = service_->ResizeVolume(id, 0);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_GT(PartitionSize(id), 250 * kMiB);
  EXPECT_FALSE(*service_->IsVolumeFormatted(id));
}

TEST_F(VolumeServiceTest, ResizeToASmallerSizeIsRefusedAndGrowingToTheCurrentSizeChangesNothing) {
  LoopDevice loop(256 * kMiB);
  const std::string id = FormattedVolume(loop);
  const uint64_t size = PartitionSize(id);
  const std::string table = loop.ReadAt(0, 34 * 512);
  EXPECT_TRUE(service_->ResizeVolume(id, 0).ok());  // already at the maximum
  EXPECT_TRUE(service_->ResizeVolume(id, static_cast<int64_t>(size)).ok());
  auto smaller = service_->ResizeVolume(id, 64 * kMiB);  // issue 13: a clear refusal, not a silent "done"
  EXPECT_EQ(smaller.code(), Code::kFailedPrecondition) << smaller.message();
  EXPECT_NE(smaller.message().find("shrinking"), std::string::npos) << smaller.message();
  EXPECT_EQ(PartitionSize(id), size);
  EXPECT_EQ(loop.ReadAt(0, 34 * 512), table);
  EXPECT_TRUE(*service_->IsVolumeFormatted(id));
}

// Issue 22: azuredisk ends every stage with ResizeVolume{volume_id: "<disk number>", size_bytes: 0}.
TEST_F(VolumeServiceTest, ResizeVolumeTakesTheNumberOfADiskWithOneVolume) {
  LoopDevice loop(256 * kMiB);
  const std::string id = FormattedVolume(loop);
  auto before = service_->GetVolumeStats(id);
  ASSERT_TRUE(before.ok());
  loop.Grow(512 * kMiB);
  ASSERT_TRUE(disks_.Rescan().ok());

  auto status = service_->ResizeVolume(std::to_string(loop.DiskNumber()), 0);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_GE(PartitionSize(id), 512 * kMiB - 2 * kMiB);
  auto after = service_->GetVolumeStats(id);
  ASSERT_TRUE(after.ok());
  EXPECT_GT(after->total_bytes, before->total_bytes);
  status = service_->ResizeVolume(std::to_string(loop.DiskNumber()), 0);
  EXPECT_TRUE(status.ok()) << "nothing left to grow: " << status.message();
}

TEST_F(VolumeServiceTest, ResizeVolumeRefusesTheNumberOfADiskWithoutExactlyOneVolume) {
  const std::string sfdisk = testing::SystemProgram("sfdisk");
  if (sfdisk.empty()) GTEST_SKIP() << "needs sfdisk (fdisk) to write two partitions";
  LoopDevice two(128 * kMiB);
  common::ProgramOptions input;
  input.stdin_data = "label: gpt\n,32M\n,\n";
  ASSERT_TRUE(common::RunProgramChecked({sfdisk, "-q", two.path()}, input).ok());
  ASSERT_TRUE(disks_.Rescan().ok());
  auto status = service_->ResizeVolume(std::to_string(two.DiskNumber()), 0);
  EXPECT_EQ(status.code(), Code::kInvalidArgument);
  EXPECT_NE(status.message().find("has 2 volumes (" + two.PartitionPath(1) + ", " + two.PartitionPath(2) + ")"),
            std::string::npos)
      << status.message();

  LoopDevice raw(64 * kMiB);
  status = service_->ResizeVolume(std::to_string(raw.DiskNumber()), 0);
  EXPECT_EQ(status.code(), Code::kInvalidArgument);
  EXPECT_NE(status.message().find("has 0 volumes"), std::string::npos) << status.message();

  EXPECT_EQ(service_->ResizeVolume("4294967295", 0).code(), Code::kNotFound);
  EXPECT_EQ(service_->ResizeVolume("-1", 0).code(), Code::kInvalidArgument);
}

TEST_F(VolumeServiceTest, ResizeBeyondTheDiskIsOutOfRangeAndNegativeIsInvalid) {
  LoopDevice loop(128 * kMiB);
  const std::string id = FormattedVolume(loop);
  EXPECT_EQ(service_->ResizeVolume(id, 1 * kGiB).code(), Code::kOutOfRange);
  EXPECT_EQ(service_->ResizeVolume(id, -1).code(), Code::kInvalidArgument);
}

TEST_F(VolumeServiceTest, FormatVolumeNeverTouchesAFileThatIsNotABlockDevice) {
  const std::string file = dir_.Sub("not-a-device");
  std::ofstream(file) << "precious";
  EXPECT_EQ(service_->FormatVolume(file).code(), Code::kInvalidArgument);
  EXPECT_EQ(service_->FormatVolume("/etc/passwd").code(), Code::kInvalidArgument);
  EXPECT_EQ(service_->FormatVolume("/dev/null").code(), Code::kInvalidArgument);
  EXPECT_EQ(service_->FormatVolume("/dev/../etc/passwd").code(), Code::kInvalidArgument);
  EXPECT_EQ(ReadFile(file), "precious");
}

TEST_F(VolumeServiceTest, UpstreamNegativeCasesFail) {
  for (const std::string id : {"", "-1"}) {
    SCOPED_TRACE("volume id '" + id + "'");
    EXPECT_EQ(service_->IsVolumeFormatted(id).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(service_->FormatVolume(id).code(), Code::kInvalidArgument);
    EXPECT_EQ(service_->ResizeVolume(id, 2 * kMiB).code(), Code::kInvalidArgument);
    EXPECT_EQ(service_->MountVolume(id, "").code(), Code::kInvalidArgument);
    EXPECT_EQ(service_->UnmountVolume(id, "").code(), Code::kInvalidArgument);
    EXPECT_EQ(service_->GetVolumeStats(id).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(service_->GetDiskNumberFromVolumeId(id).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(service_->WriteVolumeCache(id).code(), Code::kInvalidArgument);
  }
  EXPECT_EQ(service_->GetVolumeStats("/dev/no-such-volume").status().code(), Code::kNotFound);
  EXPECT_EQ(service_->ListVolumesOnDisk(UINT32_MAX, 0).status().code(), Code::kNotFound);
  EXPECT_EQ(service_->GetVolumeIdFromTargetPath("").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(service_->GetClosestVolumeIdFromTargetPath("").status().code(), Code::kInvalidArgument);
}

// Windows formats a mounted volume in place (Format-Volume dismounts it, formats it, and its mount points stay);
// sig-storage-local-static-provisioner's v1 cleanup relies on it. A volume mounted only where MountVolume mounted it
// is formatted so: its files are gone, and each mount point mounts it again with the attributes it had.
TEST_F(VolumeServiceTest, FormatVolumeOfAVolumeMountedOnlyWhereMountVolumeMountedItFormatsItInPlace) {
  LoopDevice loop(128 * kMiB);
  const std::string id = FormattedVolume(loop);
  const std::string staging = dir_.MakeDir("kubelet/staging"), publish = dir_.MakeDir("kubelet/publish");
  ASSERT_TRUE(service_->MountVolume(id, staging).ok());
  ASSERT_TRUE(service_->MountVolume(id, publish).ok());
  // An attribute MountVolume never sets: the mount point keeps what it had, not what the group's keys say.
  ASSERT_EQ(mount(nullptr, publish.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr),
            0)
      << strerror(errno);
  std::ofstream(staging + "/released.txt") << "the last tenant's data";
  const auto before = common::ProbeSignatures(id);
  ASSERT_TRUE(before.ok());

  auto status = service_->FormatVolume(id);
  ASSERT_TRUE(status.ok()) << status.message();

  const auto after = common::ProbeSignatures(id);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->fs_type, "ext4");
  EXPECT_NE(after->uuid, before->uuid) << "a new filesystem";
  EXPECT_FALSE(std::filesystem::exists(staging + "/released.txt"));
  EXPECT_FALSE(std::filesystem::exists(publish + "/released.txt"));
  for (const auto& [mnt, noexec] : {std::pair{staging, false}, std::pair{publish, true}}) {
    SCOPED_TRACE(mnt);
    auto mounted = service_->GetVolumeIdFromTargetPath(mnt);
    ASSERT_TRUE(mounted.ok()) << mounted.status().message();
    EXPECT_EQ(*mounted, id);
    struct statvfs vfs {};
    ASSERT_EQ(statvfs(mnt.c_str(), &vfs), 0);
    EXPECT_TRUE(vfs.f_flag & ST_NOSUID);
    EXPECT_TRUE(vfs.f_flag & ST_NODEV);
    EXPECT_EQ((vfs.f_flag & ST_NOEXEC) != 0, noexec);
    EXPECT_FALSE(vfs.f_flag & ST_RDONLY);
  }
  // They are still mount points MountVolume made (a forced Rmdir of the filesystem group would unmount them).
  auto table = common::ReadMountTable();
  ASSERT_TRUE(table.ok());
  common::VolumeMounts records(dir_.Sub("state"));
  for (const auto& m : common::MountsOfDevice(*table, *common::BlockDevices().ResolveVolumeId(id))) {
    EXPECT_TRUE(*records.MadeByMountVolume(m)) << m.target;
  }
  std::ofstream(staging + "/next.txt") << "the next tenant";
  EXPECT_EQ(ReadFile(publish + "/next.txt"), "the next tenant");
  EXPECT_TRUE(service_->UnmountVolume(id, publish).ok());
  EXPECT_TRUE(service_->UnmountVolume(id, staging).ok());
}

TEST_F(VolumeServiceTest, FormatVolumeInPlaceCreatesTheRequestedFilesystem) {
  if (testing::SystemProgram("mkfs.xfs").empty()) GTEST_SKIP() << "needs mkfs.xfs";
  LoopDevice loop(512 * kMiB);
  const std::string id = FormattedVolume(loop);
  const std::string mnt = dir_.MakeDir("kubelet/stage");
  ASSERT_TRUE(service_->MountVolume(id, mnt).ok());
  std::ofstream(mnt + "/released.txt") << "the last tenant's data";

  auto status = service_->FormatVolume(id, FormatOptions{"xfs", {"-L", "next"}});
  ASSERT_TRUE(status.ok()) << status.message();

  EXPECT_EQ(common::ProbeSignatures(id)->fs_type, "xfs");
  auto table = common::ReadMountTable();
  ASSERT_TRUE(table.ok());
  auto at = std::find_if(table->begin(), table->end(), [&](const auto& m) { return m.target == mnt; });
  ASSERT_NE(at, table->end()) << "mounted again";
  EXPECT_EQ(at->fs_type, "xfs");
  EXPECT_TRUE(std::filesystem::is_empty(mnt));
  EXPECT_TRUE(service_->UnmountVolume(id, mnt).ok());
}

// Only the volume group's own mount points are its to unmount: a volume also mounted anywhere else (a bind mount of
// one of them, the admin's own mount) is refused as before, and nothing is unmounted.
TEST_F(VolumeServiceTest, FormatVolumeRefusesAVolumeMountedWhereMountVolumeDidNotMountIt) {
  LoopDevice loop(128 * kMiB);
  const std::string id = FormattedVolume(loop);
  const std::string staging = dir_.MakeDir("kubelet/staging");
  ASSERT_TRUE(service_->MountVolume(id, staging).ok());
  std::ofstream(staging + "/precious.txt") << "keep me";

  const std::string bound = dir_.MakeDir("kubelet/pod-bind"), admins = dir_.MakeDir("kubelet/admins");
  ASSERT_EQ(mount(staging.c_str(), bound.c_str(), nullptr, MS_BIND, nullptr), 0) << strerror(errno);
  auto status = service_->FormatVolume(id);
  EXPECT_EQ(status.code(), Code::kFailedPrecondition);
  EXPECT_NE(status.message().find("is mounted at " + bound + ", not a mount point MountVolume made"), std::string::npos)
      << status.message();
  ASSERT_EQ(umount2(bound.c_str(), 0), 0) << strerror(errno);

  ASSERT_TRUE(service_->UnmountVolume(id, staging).ok());
  ASSERT_EQ(mount(id.c_str(), admins.c_str(), "ext4", 0, nullptr), 0) << strerror(errno);
  status = service_->FormatVolume(id);
  EXPECT_EQ(status.code(), Code::kFailedPrecondition);
  EXPECT_NE(status.message().find("is mounted at " + admins), std::string::npos) << status.message();
  EXPECT_EQ(ReadFile(admins + "/precious.txt"), "keep me");
  ASSERT_EQ(umount2(admins.c_str(), 0), 0) << strerror(errno);
}

// A busy volume (a file open on it) is never unmounted lazily: the call says it is in use, and what it unmounted
// before it met the busy mount point is mounted again.
TEST_F(VolumeServiceTest, FormatVolumeRefusesAVolumeInUseAndMountsAgainWhatItUnmounted) {
  LoopDevice loop(128 * kMiB);
  const std::string id = FormattedVolume(loop);
  const std::string staging = dir_.MakeDir("kubelet/staging"), publish = dir_.MakeDir("kubelet/publish");
  ASSERT_TRUE(service_->MountVolume(id, staging).ok());
  ASSERT_TRUE(service_->MountVolume(id, publish).ok());
  std::ofstream(staging + "/open.txt") << "a pod reads me";
  {
    std::ifstream in_use(publish + "/open.txt");
    ASSERT_TRUE(in_use.is_open());
    auto status = service_->FormatVolume(id);
    EXPECT_EQ(status.code(), Code::kFailedPrecondition);
    EXPECT_NE(status.message().find("is in use at \"" + publish + "\""), std::string::npos) << status.message();
  }
  for (const auto& mnt : {staging, publish}) {
    auto mounted = service_->GetVolumeIdFromTargetPath(mnt);
    ASSERT_TRUE(mounted.ok()) << mnt << ": " << mounted.status().message();
    EXPECT_EQ(ReadFile(mnt + "/open.txt"), "a pod reads me");
  }
  EXPECT_TRUE(service_->UnmountVolume(id, publish).ok());
  EXPECT_TRUE(service_->UnmountVolume(id, staging).ok());
}

// A disk that went offline under a mounted volume (a SCSI disk's kernel state; here the disk group's record, as
// SetDiskState refuses a mounted disk): its volume is not formatted, mounted or not.
TEST_F(VolumeServiceTest, FormatVolumeOfAMountedVolumeOnAnOfflineDiskIsRefused) {
  LoopDevice loop(128 * kMiB);
  const std::string id = FormattedVolume(loop);
  const std::string mnt = dir_.MakeDir("kubelet/stage");
  ASSERT_TRUE(service_->MountVolume(id, mnt).ok());
  std::ofstream(mnt + "/precious.txt") << "keep me";
  common::BlockInventory inventory;
  auto disk = inventory.DiskByNumber(loop.DiskNumber());
  ASSERT_TRUE(disk.ok());
  common::OfflineDisks offline(dir_.Sub("state"), {});
  ASSERT_TRUE(offline.MarkOffline(*disk).ok());

  auto status = service_->FormatVolume(id);
  EXPECT_EQ(status.code(), Code::kFailedPrecondition);
  EXPECT_NE(status.message().find("which is offline"), std::string::npos) << status.message();
  EXPECT_EQ(ReadFile(mnt + "/precious.txt"), "keep me");
  ASSERT_TRUE(offline.MarkOnline(*disk).ok());
  EXPECT_TRUE(service_->UnmountVolume(id, mnt).ok());
}

TEST_F(VolumeServiceTest, FormatVolumeRefusesAVolumeHoldingAnotherFilesystem) {
  if (testing::SystemProgram("mkfs.xfs").empty()) GTEST_SKIP() << "needs mkfs.xfs";
  LoopDevice loop(512 * kMiB);
  Configure("xfs");
  const std::string id = FormattedVolume(loop);
  auto before = common::ProbeSignatures(id);
  Configure("ext4");
  auto status = service_->FormatVolume(id);
  EXPECT_EQ(status.code(), Code::kFailedPrecondition);
  EXPECT_NE(status.message().find("filesystem of type xfs"), std::string::npos) << status.message();
  auto after = common::ProbeSignatures(id);
  EXPECT_EQ(after->fs_type, "xfs");
  EXPECT_EQ(after->uuid, before->uuid);
}

// Another process that holds a device open with `flags` until destroyed (then killed by its pid and reaped).
class DeviceHolder {
 public:
  DeviceHolder(const std::string& path, int flags) {
    int ready[2];
    if (pipe2(ready, O_CLOEXEC) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      int fd = open(path.c_str(), flags | O_CLOEXEC);
      char ok = fd >= 0 ? '1' : '0';
      if (write(ready[1], &ok, 1) != 1) _exit(1);
      for (;;) pause();
    }
    close(ready[1]);
    char ok = '0';
    opened_ = pid_ > 0 && read(ready[0], &ok, 1) == 1 && ok == '1';
    close(ready[0]);
  }
  ~DeviceHolder() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  bool opened() const { return opened_; }

 private:
  pid_t pid_ = -1;
  bool opened_ = false;
};

// Issue 13: a raw block volume in use, with data libblkid does not recognise, must not be formatted.
TEST_F(VolumeServiceTest, FormatVolumeRefusesAVolumeAnotherProcessHoldsExclusively) {
  LoopDevice loop(64 * kMiB);
  const std::string id = StageDisk(loop);
  DeviceHolder holder(id, O_RDONLY | O_EXCL);
  ASSERT_TRUE(holder.opened());
  auto status = service_->FormatVolume(id);
  EXPECT_EQ(status.code(), Code::kFailedPrecondition) << status.message();
  EXPECT_NE(status.message().find("exclusively"), std::string::npos) << status.message();
  EXPECT_TRUE(common::ProbeSignatures(id)->Empty());
}

TEST_F(VolumeServiceTest, FormatVolumeRefusesAVolumeAnotherProcessHasOpenForWriting) {
  LoopDevice loop(64 * kMiB);
  const std::string id = StageDisk(loop);
  DeviceHolder writer(id, O_RDWR);
  ASSERT_TRUE(writer.opened());
  auto status = service_->FormatVolume(id);
  EXPECT_EQ(status.code(), Code::kFailedPrecondition) << status.message();
  EXPECT_NE(status.message().find("open for writing by process"), std::string::npos) << status.message();
  EXPECT_TRUE(common::ProbeSignatures(id)->Empty());
}

// Issue 22: the disk group keeps the offline state of disks without a kernel state; the volume group, another
// library, reads it and does not use such a disk until it is online again.
TEST_F(VolumeServiceTest, AVolumeOnAnOfflineDiskIsNotFormattedMountedOrResized) {
  LoopDevice loop(128 * kMiB);
  const std::string id = StageDisk(loop);
  const std::string mnt = dir_.MakeDir("kubelet/stage");
  ASSERT_TRUE(disks_.SetDiskState(loop.DiskNumber(), false).ok());

  for (auto status : {service_->FormatVolume(id), service_->MountVolume(id, mnt), service_->ResizeVolume(id, 0)}) {
    EXPECT_EQ(status.code(), Code::kFailedPrecondition);
    EXPECT_NE(status.message().find("is on disk " + std::to_string(loop.DiskNumber()) + " (" + loop.path() +
                                    "), which is offline (taken offline with SetDiskState)"),
              std::string::npos)
        << status.message();
  }
  EXPECT_FALSE(*service_->IsVolumeFormatted(id)) << "nothing was written";

  ASSERT_TRUE(disks_.SetDiskState(loop.DiskNumber(), true).ok());
  ASSERT_TRUE(service_->FormatVolume(id).ok());
  auto status = service_->MountVolume(id, mnt);
  EXPECT_TRUE(status.ok()) << status.message();
  EXPECT_TRUE(service_->UnmountVolume(id, mnt).ok());
}

// Issue 22: FormatVolume's own fields (v1 and v2alpha1) choose the filesystem and pass mkfs options.
uint64_t Ext4BlockSize(const std::string& device) {
  std::ifstream in(device, std::ios::binary);
  in.seekg(1024 + 0x18);  // the superblock's s_log_block_size
  unsigned char log[4] = {};
  in.read(reinterpret_cast<char*>(log), 4);
  return uint64_t{1024} << log[0];
}

TEST_F(VolumeServiceTest, FormatVolumeGivesExt4TheRequestedOptions) {
  LoopDevice loop(128 * kMiB);
  const std::string id = StageDisk(loop);
  auto status = service_->FormatVolume(id, FormatOptions{"ext4", {"-b", "1024", "-L", "pvc-1", "-E", "stride=4"}});
  ASSERT_TRUE(status.ok()) << status.message();
  auto sig = common::ProbeSignatures(id);
  ASSERT_TRUE(sig.ok());
  EXPECT_EQ(sig->fs_type, "ext4");
  EXPECT_EQ(sig->label, "pvc-1");
  EXPECT_EQ(Ext4BlockSize(id), 1024u);
}

TEST_F(VolumeServiceTest, FormatVolumeCreatesTheRequestedFilesystemInsteadOfTheDefault) {
  if (testing::SystemProgram("mkfs.xfs").empty()) GTEST_SKIP() << "needs xfsprogs";
  LoopDevice loop(512 * kMiB);
  const std::string id = StageDisk(loop);
  auto status = service_->FormatVolume(id, FormatOptions{"xfs", {"-L", "data", "-m", "crc=1"}});
  ASSERT_TRUE(status.ok()) << status.message();
  auto sig = common::ProbeSignatures(id);
  ASSERT_TRUE(sig.ok());
  EXPECT_EQ(sig->fs_type, "xfs") << "the group's default is ext4";
  EXPECT_EQ(sig->label, "data");
  EXPECT_TRUE(service_->FormatVolume(id, FormatOptions{"xfs", {}}).ok()) << "already xfs: a retry succeeds";
  EXPECT_EQ(service_->FormatVolume(id).code(), Code::kFailedPrecondition) << "the default, ext4, would overwrite it";
}

TEST_F(VolumeServiceTest, RefusedFormatOptionsSayWhichAndTouchNothing) {
  LoopDevice loop(64 * kMiB);
  const std::string id = StageDisk(loop);
  auto status = service_->FormatVolume(id, FormatOptions{"", {"-d", "/etc"}});
  EXPECT_EQ(status.code(), Code::kInvalidArgument);
  EXPECT_NE(status.message().find("mkfs option \"-d\" is not allowed for ext4"), std::string::npos) << status.message();
  status = service_->FormatVolume(id, FormatOptions{"ntfs", {}});
  EXPECT_EQ(status.code(), Code::kInvalidArgument);
  EXPECT_NE(status.message().find("\"ntfs\""), std::string::npos) << status.message();
  EXPECT_FALSE(*service_->IsVolumeFormatted(id));
}

TEST_F(VolumeServiceTest, FormatVolumeTwiceKeepsTheFirstFilesystem) {
  LoopDevice loop(128 * kMiB);
  const std::string id = FormattedVolume(loop);
  auto before = common::ProbeSignatures(id);
  EXPECT_TRUE(service_->FormatVolume(id).ok());
  EXPECT_EQ(common::ProbeSignatures(id)->uuid, before->uuid);
}

TEST_F(VolumeServiceTest, FormatVolumeRefusesAPartitionedWholeDisk) {
  LoopDevice loop(64 * kMiB);
  StageDisk(loop);
  auto status = service_->FormatVolume(loop.path());
  EXPECT_EQ(status.code(), Code::kFailedPrecondition);
  EXPECT_EQ(common::ProbeSignatures(loop.path())->pt_type, "gpt");
}

TEST_F(VolumeServiceTest, ConcurrentFormatCallsOnOneVolumeMakeOneFilesystem) {
  LoopDevice loop(128 * kMiB);
  const std::string id = StageDisk(loop);
  std::vector<Status> results(3);
  std::vector<std::thread> threads;
  for (auto& r : results) threads.emplace_back([&] { r = service_->FormatVolume(id); });
  for (auto& t : threads) t.join();
  for (const auto& r : results) EXPECT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(common::ProbeSignatures(id)->fs_type, "ext4");
}

TEST_F(VolumeServiceTest, AFilesystemOnTheWholeDiskIsItsOnlyVolume) {
  LoopDevice loop(64 * kMiB);
  auto empty = service_->ListVolumesOnDisk(loop.DiskNumber(), 0);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  ASSERT_TRUE(service_->FormatVolume(loop.path()).ok());
  auto volumes = service_->ListVolumesOnDisk(loop.DiskNumber(), 0);
  ASSERT_TRUE(volumes.ok());
  ASSERT_EQ(volumes->size(), 1u);
  EXPECT_EQ(volumes->front(), loop.path());
  EXPECT_EQ(*service_->GetDiskNumberFromVolumeId(loop.path()), loop.DiskNumber());
}

// What systemd-udevd does when a writer closes a whole disk it watches (after PartitionDisk, for example): it
// takes the disk's exclusive lock without waiting and re-reads the partition table (BLKRRPART), which drops
// every partition and adds them again. Done here with BLKPG (delete, add the same) under the same lock, because
// BLKRRPART adds nothing back on a kernel built without partition-table parsers. Runs until destroyed.
class UdevLikeRereader {
 public:
  UdevLikeRereader(std::string disk_path, uint64_t start_bytes, uint64_t size_bytes)
      : path_(std::move(disk_path)), start_(start_bytes), size_(size_bytes), thread_([this] { Run(); }) {}
  ~UdevLikeRereader() {
    stop_ = true;
    thread_.join();
  }
  int rereads() const { return rereads_; }

 private:
  bool Blkpg(int fd, int op) {
    struct blkpg_partition part {};
    part.start = static_cast<long long>(start_);
    part.length = static_cast<long long>(size_);
    part.pno = 1;
    struct blkpg_ioctl_arg arg {};
    arg.op = op;
    arg.datalen = sizeof part;
    arg.data = &part;
    return ioctl(fd, BLKPG, &arg) == 0;
  }
  void Run() {
    while (!stop_) {
      int fd = open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd >= 0) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0 && Blkpg(fd, BLKPG_DEL_PARTITION)) {
          std::this_thread::sleep_for(std::chrono::microseconds(200));  // the kernel parses the table
          if (Blkpg(fd, BLKPG_ADD_PARTITION)) ++rereads_;
        }
        close(fd);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
    }
  }

  std::string path_;
  uint64_t start_, size_;
  std::atomic<bool> stop_{false};
  std::atomic<int> rereads_{0};
  std::thread thread_;
};

TEST_F(VolumeServiceTest, ListVolumesOnDiskAfterPartitionDiskSeesThePartitionEvenWhileUdevRereadsTheTable) {
  int missed = 0, listings = 0, rereads = 0;
  for (int round = 0; round < 20 && missed == 0; ++round) {
    LoopDevice loop(32 * kMiB);
    ASSERT_TRUE(disks_.PartitionDisk(loop.DiskNumber()).ok());
    auto check = [&] {
      auto volumes = service_->ListVolumesOnDisk(loop.DiskNumber(), 0);
      ++listings;
      ASSERT_TRUE(volumes.ok()) << volumes.status().message();
      if (*volumes != std::vector<std::string>{loop.PartitionPath(1)}) {
        ++missed;
        ADD_FAILURE() << "listing " << listings << " of round " << round << ": " << volumes->size() << " volumes";
      }
    };
    check();  // read-your-writes, nobody else about
    auto partition = common::BlockDevices().ResolveVolumeId(loop.PartitionPath(1));
    ASSERT_TRUE(partition.ok()) << partition.status().message();
    UdevLikeRereader udev(loop.path(), partition->start_bytes, partition->size_bytes);
    for (int i = 0; i < 50 && missed == 0; ++i) check();
    rereads += udev.rereads();
  }
  EXPECT_EQ(missed, 0) << "a listing missed the partition (" << listings << " listings)";
  EXPECT_GT(rereads, 0) << "the udev stand-in never re-read a table; the test proved nothing";
}

// Issue 11: a disk whose probe fails is an error in ListVolumesOnDisk as in IsVolumeFormatted, not "no volume".
TEST(VolumeBackendTest, ListVolumesOnDiskReportsADiskThatCannotBeProbed) {
  testing::FakeScsiDisk disk("sdz", "7:0:0:1", 4242, "", "");
  const std::string node = disk.roots().dev + "/sdz";
  std::filesystem::remove(node);
  std::filesystem::create_directory(node);  // opens and locks, but libblkid cannot probe it
  TempDir dir;
  auto policy = common::PathPolicy::Create(dir.MakeDir("kubelet"), {});
  ASSERT_TRUE(policy.ok());
  LinuxVolumeBackend backend(*policy, LinuxVolumeOptions{.roots = disk.roots()});
  auto probe = common::ProbeSignatures(node);
  ASSERT_FALSE(probe.ok()) << "the stand-in is probed without error; the test proves nothing";
  auto volumes = backend.ListVolumesOnDisk(4242, 0);
  EXPECT_FALSE(volumes.ok()) << "listed " << (volumes.ok() ? volumes->size() : 0) << " volumes";
  EXPECT_EQ(volumes.status().code(), probe.status().code()) << volumes.status().message();
}

TEST_F(VolumeServiceTest, ListVolumesOnDiskFiltersByPartitionNumber) {
  LoopDevice loop(64 * kMiB);
  const std::string id = StageDisk(loop);
  auto first = service_->ListVolumesOnDisk(loop.DiskNumber(), 1);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(*first, std::vector<std::string>{id});
  auto second = service_->ListVolumesOnDisk(loop.DiskNumber(), 2);
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->empty());
}

TEST_F(VolumeServiceTest, MountSameVolumeTwiceSucceeds) {
  LoopDevice loop(128 * kMiB);
  const std::string id = FormattedVolume(loop);
  const std::string mnt = dir_.MakeDir("kubelet/twice");
  ASSERT_TRUE(service_->MountVolume(id, mnt).ok());
  auto status = service_->MountVolume(id, mnt);
  EXPECT_TRUE(status.ok()) << status.message();
  auto mounts = common::ReadMountTable();
  ASSERT_TRUE(mounts.ok());
  EXPECT_EQ(std::count_if(mounts->begin(), mounts->end(), [&](auto& m) { return m.target == mnt; }), 1)
      << "no stacked second mount";
}

// Issue 13: a setuid binary or a device node on a volume must give a pod nothing.
TEST_F(VolumeServiceTest, MountVolumeMountsWithNosuidAndNodevAndADeviceNodeOnTheVolumeDoesNotOpen) {
  LoopDevice loop(128 * kMiB);
  const std::string id = FormattedVolume(loop);
  const std::string mnt = dir_.MakeDir("kubelet/safe");
  ASSERT_TRUE(service_->MountVolume(id, mnt).ok());
  struct statvfs vfs {};
  ASSERT_EQ(statvfs(mnt.c_str(), &vfs), 0);
  EXPECT_TRUE(vfs.f_flag & ST_NOSUID);
  EXPECT_TRUE(vfs.f_flag & ST_NODEV);
  const std::string node = mnt + "/null";
  ASSERT_EQ(mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 3)), 0) << strerror(errno);
  errno = 0;
  int fd = open(node.c_str(), O_RDWR | O_CLOEXEC);
  EXPECT_LT(fd, 0) << "a device node on the volume opened";
  EXPECT_EQ(errno, EACCES);
  if (fd >= 0) close(fd);
}

TEST_F(VolumeServiceTest, AnAdminMayAllowSetuidAndDevicesOnMountedVolumes) {
  LoopDevice loop(128 * kMiB);
  const std::string id = FormattedVolume(loop);
  auto policy = common::PathPolicy::Create(kubelet_, {});
  ASSERT_TRUE(policy.ok());
  LinuxVolumeBackend relaxed(
      *policy,
      LinuxVolumeOptions{.default_fs_type = "ext4", .scratch_dir = dir_.Sub("scratch"), .mount_nosuid_nodev = false});
  const std::string mnt = dir_.MakeDir("kubelet/relaxed");
  auto target = policy->Confine(mnt, "target_path");
  ASSERT_TRUE(target.ok());
  auto volume = relaxed.ResolveVolume(id);
  ASSERT_TRUE(volume.ok()) << volume.status().message();
  ASSERT_TRUE(relaxed.MountVolume(*volume, *target).ok());
  struct statvfs vfs {};
  ASSERT_EQ(statvfs(mnt.c_str(), &vfs), 0);
  EXPECT_FALSE(vfs.f_flag & ST_NOSUID);
  EXPECT_FALSE(vfs.f_flag & ST_NODEV);
}

// Issue 13: a filesystem the node mounted for itself must not reach the kubelet tree.
TEST_F(VolumeServiceTest, MountVolumeRefusesAVolumeMountedOutsideTheAllowedRoots) {
  LoopDevice loop(128 * kMiB);
  const std::string id = FormattedVolume(loop);
  const std::string hosts_own = dir_.MakeDir("node-filesystem");  // outside kubelet_; TempDir unmounts it
  ASSERT_EQ(mount(id.c_str(), hosts_own.c_str(), "ext4", 0, nullptr), 0) << strerror(errno);
  const std::string mnt = dir_.MakeDir("kubelet/pod-volume");
  auto status = service_->MountVolume(id, mnt);
  EXPECT_EQ(status.code(), Code::kFailedPrecondition) << status.message();
  EXPECT_NE(status.message().find("outside the allowed roots"), std::string::npos) << status.message();
  auto where = common::ReadMountTable();
  ASSERT_TRUE(where.ok());
  EXPECT_EQ(std::count_if(where->begin(), where->end(), [&](auto& m) { return m.target == mnt; }), 0);

  // Mounted inside the roots (a staging path) it may be mounted again (a publish path).
  ASSERT_EQ(umount2(hosts_own.c_str(), 0), 0) << strerror(errno);
  ASSERT_TRUE(service_->MountVolume(id, dir_.MakeDir("kubelet/staging")).ok());
  status = service_->MountVolume(id, mnt);
  EXPECT_TRUE(status.ok()) << status.message();
}

TEST_F(VolumeServiceTest, MountingAnotherVolumeOnAnOccupiedTargetFails) {
  LoopDevice first(128 * kMiB), second(128 * kMiB);
  const std::string a = FormattedVolume(first), b = FormattedVolume(second);
  const std::string mnt = dir_.MakeDir("kubelet/occupied");
  ASSERT_TRUE(service_->MountVolume(a, mnt).ok());
  auto status = service_->MountVolume(b, mnt);
  EXPECT_EQ(status.code(), Code::kFailedPrecondition);
  EXPECT_NE(status.message().find(a), std::string::npos) << status.message();
  EXPECT_EQ(*service_->GetVolumeIdFromTargetPath(mnt), a);
}

TEST_F(VolumeServiceTest, MountRefusesUnformattedVolumesAndUnusableTargets) {
  LoopDevice loop(64 * kMiB);
  const std::string raw = StageDisk(loop);
  const std::string mnt = dir_.MakeDir("kubelet/target");
  EXPECT_EQ(service_->MountVolume(raw, mnt).code(), Code::kFailedPrecondition);
  ASSERT_TRUE(service_->FormatVolume(raw).ok());
  EXPECT_EQ(service_->MountVolume(raw, kubelet_ + "/missing").code(), Code::kNotFound);
  std::ofstream(kubelet_ + "/file") << "x";
  EXPECT_EQ(service_->MountVolume(raw, kubelet_ + "/file").code(), Code::kFailedPrecondition);
  EXPECT_EQ(service_->MountVolume(raw, kubelet_).code(), Code::kInvalidArgument) << "the root itself";
  EXPECT_EQ(service_->MountVolume(raw, dir_.MakeDir("outside")).code(), Code::kPermissionDenied);
  EXPECT_EQ(service_->MountVolume(raw, "/etc").code(), Code::kPermissionDenied);
  EXPECT_EQ(service_->MountVolume(raw, kubelet_ + "/../outside").code(), Code::kInvalidArgument);
  std::filesystem::create_directory_symlink(dir_.Sub("outside"), kubelet_ + "/escape");
  EXPECT_EQ(service_->MountVolume(raw, kubelet_ + "/escape").code(), Code::kPermissionDenied);
  auto mounts = common::ReadMountTable();
  ASSERT_TRUE(mounts.ok());
  EXPECT_TRUE(common::MountsOfDevice(*mounts, *common::BlockDevices().ResolveVolumeId(raw)).empty());
}

TEST_F(VolumeServiceTest, UnmountingWhatIsNotMountedSucceeds) {
  LoopDevice loop(128 * kMiB);
  const std::string id = FormattedVolume(loop);
  const std::string mnt = dir_.MakeDir("kubelet/unmount");
  EXPECT_TRUE(service_->UnmountVolume(id, mnt).ok());
  EXPECT_TRUE(service_->UnmountVolume(id, kubelet_ + "/never-created").ok());
  ASSERT_TRUE(service_->MountVolume(id, mnt).ok());
  ASSERT_TRUE(service_->UnmountVolume(id, mnt).ok());
  EXPECT_TRUE(service_->UnmountVolume(id, mnt).ok());
}

TEST_F(VolumeServiceTest, UnmountRefusesToRemoveAnotherVolumesMount) {
  LoopDevice first(128 * kMiB), second(128 * kMiB);
  const std::string a = FormattedVolume(first), b = FormattedVolume(second);
  const std::string mnt = dir_.MakeDir("kubelet/other");
  ASSERT_TRUE(service_->MountVolume(a, mnt).ok());
  EXPECT_EQ(service_->UnmountVolume(b, mnt).code(), Code::kFailedPrecondition);
  EXPECT_EQ(*service_->GetVolumeIdFromTargetPath(mnt), a);
}

TEST_F(VolumeServiceTest, UnmountThroughASymlinkUnmountsTheRealMountPoint) {
  LoopDevice loop(128 * kMiB);
  const std::string id = FormattedVolume(loop);
  const std::string mnt = dir_.MakeDir("kubelet/real");
  ASSERT_TRUE(service_->MountVolume(id, mnt).ok());
  std::filesystem::create_directory_symlink(mnt, kubelet_ + "/alias");
  auto status = service_->UnmountVolume(id, kubelet_ + "/alias");
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(service_->GetVolumeIdFromTargetPath(mnt).status().code(), Code::kNotFound);
}

TEST_F(VolumeServiceTest, StatsOfAnUnmountedVolumeMatchTheMountedOnes) {
  LoopDevice loop(256 * kMiB);
  const std::string id = FormattedVolume(loop);
  auto unmounted = service_->GetVolumeStats(id);
  ASSERT_TRUE(unmounted.ok()) << unmounted.status().message();
  const std::string mnt = dir_.MakeDir("kubelet/stats");
  ASSERT_TRUE(service_->MountVolume(id, mnt).ok());
  auto mounted = service_->GetVolumeStats(id);
  ASSERT_TRUE(mounted.ok());
  EXPECT_EQ(mounted->total_bytes, unmounted->total_bytes);
  auto mounts = common::ReadMountTable();
  ASSERT_TRUE(mounts.ok());
  EXPECT_EQ(common::MountsOfDevice(*mounts, *common::BlockDevices().ResolveVolumeId(id)).size(), 1u)
      << "reading the stats of an unmounted volume leaves no mount behind";
}

// Issue 13: a read-only query of a damaged filesystem must not fall back to a read-write mount (which would
// replay its journal). The partition is made read-only, so a read-write attempt would fail differently
// (EACCES) from the read-only one (EINVAL).
TEST_F(VolumeServiceTest, StatsOfADamagedFilesystemFailWithoutAReadWriteAttempt) {
  LoopDevice loop(64 * kMiB);
  const std::string id = StageDisk(loop);
  auto mkfs = common::RunProgram({testing::SystemProgram("mkfs.ext4"), "-q", "-F", "-O", "^metadata_csum", id});
  ASSERT_TRUE(mkfs.ok() && mkfs->exit_code == 0);
  auto partition = common::BlockDevices().ResolveVolumeId(id);
  ASSERT_TRUE(partition.ok());
  loop.WriteAt(partition->start_bytes + 1024 + 0x18, std::string("\x14\0\0\0", 4));  // s_log_block_size = 20
  auto formatted = service_->IsVolumeFormatted(id);
  ASSERT_TRUE(formatted.ok()) << formatted.status().message();
  ASSERT_TRUE(*formatted) << "libblkid still sees ext4";
  int fd = open(id.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  int read_only = 1;
  ASSERT_EQ(ioctl(fd, BLKROSET, &read_only), 0) << strerror(errno);
  close(fd);
  auto stats = service_->GetVolumeStats(id);
  EXPECT_EQ(stats.status().code(), Code::kFailedPrecondition) << stats.status().message();
  EXPECT_NE(stats.status().message().find("Invalid argument"), std::string::npos) << stats.status().message();
}

TEST_F(VolumeServiceTest, SeveralDisksAreStagedInParallel) {
  constexpr int kDisks = 3;
  std::vector<std::unique_ptr<LoopDevice>> loops;
  for (int i = 0; i < kDisks; ++i) loops.push_back(std::make_unique<LoopDevice>(128 * kMiB));
  std::vector<std::string> errors(kDisks);
  std::vector<std::thread> threads;
  for (int i = 0; i < kDisks; ++i) {
    threads.emplace_back([&, i] {
      auto fail = [&](const std::string& step, const Status& s) {
        if (!s.ok() && errors[i].empty()) errors[i] = step + ": " + s.message();
        return !s.ok();
      };
      const uint32_t number = loops[i]->DiskNumber();
      if (fail("partition", disks_.PartitionDisk(number))) return;
      auto volumes = service_->ListVolumesOnDisk(number, 0);
      if (fail("list", volumes.status()) || volumes->size() != 1) return;
      const std::string id = volumes->front();
      if (fail("format", service_->FormatVolume(id))) return;
      const std::string mnt = dir_.MakeDir("kubelet/parallel-" + std::to_string(i));
      if (fail("mount", service_->MountVolume(id, mnt))) return;
      std::ofstream(mnt + "/id") << i;
      if (ReadFile(mnt + "/id") != std::to_string(i)) errors[i] = "read back";
      if (fail("unmount", service_->UnmountVolume(id, mnt))) return;
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kDisks; ++i) EXPECT_EQ(errors[i], "") << "disk " << i;
}

}  // namespace
}  // namespace csi_proxy::volume

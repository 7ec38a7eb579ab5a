// sig-storage-local-static-provisioner on Windows: not a CSI driver but a DaemonSet that turns the local disks an
// admin mounted under a discovery directory into PersistentVolumes, and cleans them when released. Its calls:
// pkg/util/volume_util_windows.go over pkg/util/csi_proxy_v1_windows.go (v1, falling back to v1beta), and its v2alpha1
// client, csi_proxy_v2alpha1_windows.go, the only known client of RmdirContents and GetClosestVolumeIDFromTargetPath.
#include <sys/mount.h>

#include "csi_node.h"

namespace csi_proxy::testing::drivers {
namespace {

class LocalStaticProvisioner : public ::testing::Test {
 protected:
  void SetUp() override {
    CSI_PROXY_SKIP_WITHOUT_LOOP_DEVICES();
    if (SystemProgram("mkfs.xfs").empty()) GTEST_SKIP() << "needs mkfs.xfs (the node's default_fs_type)";
    ASSERT_TRUE(node_.Start()) << node_.error();
    disk_ = std::make_unique<LoopDevice>(512 * kMiB);
    // The admin's part: a local disk with a filesystem, mounted under the discovery directory, both through the
    // proxy (as a Windows admin adds a volume mount point), so that the v1 cleanup may format it in place.
    ASSERT_OK(node_.PartitionDisk(disk_->DiskNumber()));
    ASSERT_OK(node_.FormatVolume(disk_->PartitionPath(1)));
    std::filesystem::create_directories(host_path_);
    ASSERT_OK(node_.MountVolume(disk_->PartitionPath(1), host_path_));
    std::filesystem::create_directories(host_path_ + "/tenant-1/cache");
    std::ofstream(host_path_ + "/tenant-1/data.txt") << "the released volume's data";
  }
  void TearDown() override {
    if (disk_) umount2(host_path_.c_str(), MNT_DETACH);
  }

  // discovery.go for a filesystem volume: IsLikelyMountPoint = IsSymlink(host path), then GetFsCapacityByte =
  // GetVolumeIDFromTargetPath, GetVolumeStats (total).
  void Discover(int64_t* capacity) {
    bool mount_point = false;
    ASSERT_OK(node_.IsSymlink(host_path_, &mount_point));
    ASSERT_TRUE(mount_point) << "a mount point counts as a link";
    std::string volume;
    ASSERT_OK(node_.GetVolumeIDFromTargetPath(host_path_, &volume));
    EXPECT_EQ(volume, disk_->PartitionPath(1));
    ASSERT_OK(node_.GetVolumeStats(volume, capacity));
  }

  TempDir disks_;  // the discovery directory (/mnt/disks on a node), an allowed working dir
  std::string host_path_ = disks_.Sub("vol1");
  CsiNode node_{"", "working_dirs = [\"" + disks_.path() + "\"]\n"};
  std::unique_ptr<LoopDevice> disk_;
};

TEST_F(LocalStaticProvisioner, DiscoveryFindsTheMountedDiskAndItsCapacity) {
  int64_t capacity = 0;
  ASSERT_NO_FATAL_FAILURE(Discover(&capacity));
  EXPECT_GT(capacity, int64_t{400 * kMiB});
}

// The v2alpha1 cleanup of a released volume: RmdirContents of the host path, and its capacity again through
// GetClosestVolumeIDFromTargetPath and GetVolumeStats. The volume stays mounted and empty, ready for the next claim.
TEST_F(LocalStaticProvisioner, TheV2alpha1CleanupEmptiesTheVolumeAndKeepsItMounted) {
  ASSERT_OK(node_.RmdirContents(host_path_));
  EXPECT_TRUE(std::filesystem::is_empty(host_path_));
  EXPECT_TRUE(CsiNode::AnythingOfDiskMounted(*disk_));
  std::string volume;
  ASSERT_OK(node_.GetClosestVolumeIDFromTargetPath(host_path_, &volume));
  EXPECT_EQ(volume, disk_->PartitionPath(1));
  int64_t capacity = 0;
  ASSERT_OK(node_.GetVolumeStats(volume, &capacity));
  EXPECT_GT(capacity, int64_t{400 * kMiB});
}

// The v1 cleanup (deleter.go DeleteContents): GetVolumeIDFromTargetPath, then FormatVolume of the mounted volume,
// which Windows answers by formatting it in place. So does the volume group for a volume mounted only where
// MountVolume mounted it: unmounted, formatted, mounted again. The provisioner's next discovery finds the same
// mount point with an empty filesystem of the same capacity, ready for the next claim.
TEST_F(LocalStaticProvisioner, TheV1CleanupFormatsTheMountedVolumeAndItStaysMountedEmpty) {
  int64_t before = 0;
  ASSERT_NO_FATAL_FAILURE(Discover(&before));
  std::string volume;
  ASSERT_OK(node_.GetVolumeIDFromTargetPath(host_path_, &volume));
  ASSERT_OK(node_.FormatVolume(volume));

  int64_t after = 0;
  ASSERT_NO_FATAL_FAILURE(Discover(&after));
  EXPECT_EQ(after, before);
  EXPECT_TRUE(std::filesystem::is_empty(host_path_)) << "a new, empty filesystem at the same mount point";
  EXPECT_FALSE(CsiNode::Exists(host_path_ + "/tenant-1/data.txt"));
}

// A disk the admin mounted by other means (fstab, mount(8)) is not the volume group's to unmount: the v1 cleanup
// is refused and says why, the released volume is not handed to the next claim, and its data stays. The
// v2alpha1 cleanup (above) works for it.
TEST_F(LocalStaticProvisioner, TheV1CleanupOfADiskTheAdminMountedByOtherMeansIsRefusedAndItsDataStays) {
  ASSERT_OK(node_.UnmountVolume(disk_->PartitionPath(1), host_path_));
  ASSERT_EQ(mount(disk_->PartitionPath(1).c_str(), host_path_.c_str(), "xfs", 0, nullptr), 0) << strerror(errno);
  std::string volume;
  ASSERT_OK(node_.GetVolumeIDFromTargetPath(host_path_, &volume));
  auto status = node_.FormatVolume(volume);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find("is mounted at " + host_path_ + ", not a mount point MountVolume made"),
            std::string::npos)
      << status.error_message();
  EXPECT_EQ(ReadText(host_path_ + "/tenant-1/data.txt"), "the released volume's data");
}

}  // namespace
}  // namespace csi_proxy::testing::drivers

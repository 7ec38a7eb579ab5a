// azuredisk-csi-driver in csi-proxy mode (--enable-windows-host-process=false; v1, falling back to v1beta), as its
// node server and Windows mounter order the calls: pkg/azuredisk/nodeserver.go, pkg/azuredisk/azure_common_windows.go,
// pkg/mounter/safe_mounter_windows.go. It never calls UnmountVolume or SetDiskState: it unstages with a forced
// Rmdir of the staging mount point, which Windows answers by removing the volume mount point (issue 22).
#include "csi_node.h"

namespace csi_proxy::testing::drivers {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

class AzureDisk : public BlockDriverTest {
 protected:
  // NodeStageVolume(staging_path, publish_context["LUN"]).
  void NodeStage(const std::string& staging) {
    // getDevicePathWithLUN: scsiHostRescan (Disk.Rescan), then findDiskByLun every second (Disk.ListDiskLocations,
    // LUNID == the LUN). A loop disk has no SCSI address: the LUN match runs against SCSI disks recorded from real
    // ones (DriverDiskLookup.AzureDiskFindsItsDataDiskByLun); the disk number here is the loop disk's.
    ASSERT_OK(node_.Rescan());
    ASSERT_OK(node_.ListDiskLocations());
    const uint32_t disk = disk_->DiskNumber();
    // ensureMountPoint: IsLikelyNotMountPoint = PathExists, then IsSymlink (true for a mount point).
    bool exists = false, mounted = false;
    ASSERT_OK(node_.PathExists(staging, &exists));
    ASSERT_TRUE(exists) << "kubelet created the staging directory";
    ASSERT_OK(node_.IsSymlink(staging, &mounted));
    ASSERT_FALSE(mounted);
    // formatAndMount -> csiProxyMounter.FormatAndMount: PartitionDisk, ListVolumesOnDisk (VolumeIds[0]),
    // IsVolumeFormatted, FormatVolume when not, MountVolume.
    ASSERT_OK(node_.PartitionDisk(disk));
    std::vector<std::string> volumes;
    ASSERT_OK(node_.ListVolumesOnDisk(disk, &volumes));
    ASSERT_FALSE(volumes.empty());
    bool formatted = false;
    ASSERT_OK(node_.IsVolumeFormatted(volumes[0], &formatted));
    if (!formatted) ASSERT_OK(node_.FormatVolume(volumes[0]));
    ASSERT_OK(node_.MountVolume(volumes[0], staging));
    // needResizeVolume is true on Windows: resizeVolume(source) with the disk number as the volume id.
    ASSERT_OK(node_.ResizeVolume(std::to_string(disk), 0));
  }

  // NodePublishVolume(staging, target): preparePublishPath, ensureMountPoint, then Mount = CreateSymlink.
  void NodePublish(const std::string& staging, const std::string& target) {
    bool exists = true;
    ASSERT_OK(node_.PathExists(target, &exists));
    if (exists) ASSERT_OK(node_.Rmdir(target, /*force=*/true));
    ASSERT_OK(node_.PathExists(target, &exists));  // ensureMountPoint's IsLikelyNotMountPoint: not there
    ASSERT_FALSE(exists);
    ASSERT_OK(node_.CreateSymlink(staging, target));
  }

  // NodeGetVolumeStats(target): csiProxyMounter.GetVolumeStats = GetVolumeIDFromTargetPath, GetVolumeStats.
  void NodeGetVolumeStats(const std::string& target, int64_t* total, int64_t* used) {
    std::string volume;
    ASSERT_OK(node_.GetVolumeIDFromTargetPath(target, &volume));
    ASSERT_OK(node_.GetVolumeStats(volume, total, used));
  }

  // NodeExpandVolume(volume_path, required bytes): getDevicePathWithMountPath (GetVolumeIDFromTargetPath), the size
  // check before (GetVolumeStats, rounded up to GiB, at least the request), resizeVolume (ResizeVolume of the
  // volume, 0), the size check after.
  void NodeExpand(const std::string& volume_path, int64_t required_bytes, int64_t* capacity) {
    std::string volume;
    ASSERT_OK(node_.GetVolumeIDFromTargetPath(volume_path, &volume));
    const int64_t request_gib = (required_bytes + kGiB - 1) / kGiB;
    int64_t total = 0;
    ASSERT_OK(node_.GetVolumeStats(volume, &total));
    ASSERT_GE((total + kGiB - 1) / kGiB, request_gib) << "validateBlockDeviceSize before the resize";
    ASSERT_OK(node_.ResizeVolume(volume, 0));
    ASSERT_OK(node_.GetVolumeStats(volume, capacity));
    ASSERT_GE((*capacity + kGiB - 1) / kGiB, request_gib) << "validateBlockDeviceSize after the resize";
  }

  // NodeUnpublishVolume(target): CleanupMountPoint with the extensive mount-point check: Unmount =
  // GetVolumeIDFromTargetPath, WriteVolumeCache, then Rmdir(target, force).
  void NodeUnpublish(const std::string& target) {
    std::string volume;
    ASSERT_OK(node_.GetVolumeIDFromTargetPath(target, &volume));
    ASSERT_OK(node_.WriteVolumeCache(volume));
    ASSERT_OK(node_.Rmdir(target, true));
  }

  // NodeUnstageVolume(staging): CleanupMountPoint(staging, true) = GetVolumeIDFromTargetPath, WriteVolumeCache,
  // Rmdir(staging, force). No UnmountVolume: the forced Rmdir of the mount point removes it, as on Windows.
  void NodeUnstage(const std::string& staging) {
    std::string volume;
    ASSERT_OK(node_.GetVolumeIDFromTargetPath(staging, &volume));
    ASSERT_OK(node_.WriteVolumeCache(volume));
    ASSERT_OK(node_.Rmdir(staging, true));
  }
};

TEST_F(AzureDisk, EveryNodeCallCompletesAndTheVolumeKeepsItsDataAcrossAStageAgain) {
  const std::string staging = node_.StagingPath("disk.csi.azure.com", "pv-azuredisk");
  const std::string target = node_.PublishPath("pod-1", "pv-azuredisk");
  node_.KubeletMakesDir(staging);
  ASSERT_NO_FATAL_FAILURE(NodeStage(staging));
  node_.KubeletMakesDir(std::filesystem::path(target).parent_path());
  ASSERT_NO_FATAL_FAILURE(NodePublish(staging, target));
  { std::ofstream(target + "/written-by-pod-1.txt") << "azuredisk data"; }

  int64_t total = 0, used = 0;
  ASSERT_NO_FATAL_FAILURE(NodeGetVolumeStats(target, &total, &used));
  EXPECT_GT(used, 0);
  EXPECT_GT(total, int64_t{400 * kMiB});

  CloudGrowsTheDisk(kGrownBytes);
  int64_t capacity = 0;
  ASSERT_NO_FATAL_FAILURE(NodeExpand(target, kGrownBytes, &capacity));
  EXPECT_GT(capacity, int64_t{900 * kMiB});

  ASSERT_NO_FATAL_FAILURE(NodeUnpublish(target));
  EXPECT_FALSE(CsiNode::Exists(target));
  EXPECT_TRUE(CsiNode::AnythingOfDiskMounted(*disk_)) << "still staged for other pods";
  ASSERT_NO_FATAL_FAILURE(NodeUnstage(staging));

  ExpectUnstaged(staging, /*offline=*/false);  // azuredisk does not take disks offline

  // The disk moves to another pod on this node: it stages again, with its data and its grown size.
  node_.KubeletMakesDir(staging);
  ASSERT_NO_FATAL_FAILURE(NodeStage(staging));
  const std::string target2 = node_.PublishPath("pod-2", "pv-azuredisk");
  node_.KubeletMakesDir(std::filesystem::path(target2).parent_path());
  ASSERT_NO_FATAL_FAILURE(NodePublish(staging, target2));
  EXPECT_EQ(ReadText(target2 + "/written-by-pod-1.txt"), "azuredisk data");
  ASSERT_NO_FATAL_FAILURE(NodeGetVolumeStats(target2, &total, &used));
  EXPECT_EQ(total, capacity);
  ASSERT_NO_FATAL_FAILURE(NodeUnpublish(target2));
  ASSERT_NO_FATAL_FAILURE(NodeUnstage(staging));
  EXPECT_FALSE(CsiNode::AnythingOfDiskMounted(*disk_));
}

}  // namespace
}  // namespace csi_proxy::testing::drivers

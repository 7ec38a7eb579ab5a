// The GCE persistent disk driver over named pipes (v1, then v1beta), as its node server and Windows mounter order
// the calls: pkg/gce-pd-csi-driver/node.go, pkg/gce-pd-csi-driver/utils_windows.go,
// pkg/mount-manager/safe-mounter-v1_windows.go, pkg/mount-manager/statter_windows.go, pkg/resizefs/resizefs_windows.go.
// It ends every unstage with SetDiskState(offline) and stages with PartitionDisk before SetDiskState(online):
// on NVMe, virtio and loop disks that needs the host's offline state (issue 22).
#include "csi_node.h"

namespace csi_proxy::testing::drivers {
namespace {

class GcePd : public BlockDriverTest {
 protected:
  // getDevicePath -> GetDiskNumber: the metadata server's disks, then ListDiskIDs (an NVMe EUI, or the last word of
  // Page83 equal to the device name). A loop disk has neither: the lookup itself runs against disks recorded from
  // real ones (DriverDiskLookup.GcePdFindsAnNvmeDiskByItsEuiAndAScsiDiskByTheLastWordOfPage83).
  uint32_t GetDiskNumber() {
    EXPECT_TRUE(node_.ListDiskIDs().ok());
    return disk_->DiskNumber();
  }

  // NodeStageVolume: getDevicePath; isVolumePathMounted (IsLikelyNotMountPoint = IsSymlink); prepareStagePath
  // (nothing on Windows); formatAndMount (FormatAndMount above); then the resize of a writable volume (resizefs v1:
  // GetVolumeIDFromTargetPath, ResizeVolume without a size).
  void NodeStage(const std::string& staging) {
    const uint32_t disk = GetDiskNumber();
    bool mounted = true;
    ASSERT_OK(node_.IsSymlink(staging, &mounted));
    ASSERT_FALSE(mounted);
    ASSERT_NO_FATAL_FAILURE(FormatAndMount(node_, disk, staging));
    std::string volume;
    ASSERT_OK(node_.GetVolumeIDFromTargetPath(staging, &volume));
    ASSERT_OK(node_.ResizeVolume(volume, 0));
  }

  // NodePublishVolume: isVolumePathMounted(target) (IsSymlink; an error means not mounted), preparePublishPath
  // (PathExists, RemovePodDir = Rmdir force), Mount = os.MkdirAll(parent) in the driver's container, CreateSymlink.
  void NodePublish(const std::string& staging, const std::string& target) {
    bool mounted = false;
    EXPECT_FALSE(node_.IsSymlink(target, &mounted).ok()) << "not there yet: the driver takes the error for 'no'";
    bool exists = true;
    ASSERT_OK(node_.PathExists(target, &exists));
    if (exists) ASSERT_OK(node_.Rmdir(target, true));
    std::filesystem::create_directories(std::filesystem::path(target).parent_path());
    ASSERT_OK(node_.CreateSymlink(staging, target));
  }

  // NodeGetVolumeStats: statter StatFSV1 = GetVolumeIDFromTargetPath, GetVolumeStats.
  void NodeGetVolumeStats(const std::string& path, int64_t* total, int64_t* used) {
    std::string volume;
    ASSERT_OK(node_.GetVolumeIDFromTargetPath(path, &volume));
    ASSERT_OK(node_.GetVolumeStats(volume, total, used));
  }

  // NodeExpandVolume: getDevicePath (ListDiskIDs), resizer.Resize (GetVolumeIDFromTargetPath, ResizeVolume),
  // getBlockSizeBytes (GetDiskStats of the disk).
  void NodeExpand(const std::string& volume_path, int64_t* disk_bytes) {
    const uint32_t disk = GetDiskNumber();
    std::string volume;
    ASSERT_OK(node_.GetVolumeIDFromTargetPath(volume_path, &volume));
    ASSERT_OK(node_.ResizeVolume(volume, 0));
    ASSERT_OK(node_.GetDiskStats(disk, disk_bytes));
  }

  // NodeUnpublishVolume: cleanupPublishPath = RemovePodDir = Rmdir(target, force).
  void NodeUnpublish(const std::string& target) { ASSERT_OK(node_.Rmdir(target, true)); }

  // NodeUnstageVolume: cleanupStagePath = UnmountDevice: PathExists, then UnmountAndTakeOffline (above: the
  // offline state "to have a clean state").
  void NodeUnstage(const std::string& staging) {
    bool exists = false;
    ASSERT_OK(node_.PathExists(staging, &exists));
    ASSERT_TRUE(exists);
    ASSERT_NO_FATAL_FAILURE(UnmountAndTakeOffline(node_, staging));
  }
};

TEST_F(GcePd, EveryNodeCallCompletesTheDiskGoesOfflineAndStagesAgainWithItsData) {
  const std::string staging = node_.StagingPath("pd.csi.storage.gke.io", "pv-gce");
  const std::string target = node_.PublishPath("pod-1", "pv-gce");
  node_.KubeletMakesDir(staging);
  ASSERT_NO_FATAL_FAILURE(NodeStage(staging));
  node_.KubeletMakesDir(std::filesystem::path(target).parent_path());
  ASSERT_NO_FATAL_FAILURE(NodePublish(staging, target));
  { std::ofstream(target + "/written-by-pod-1.txt") << "gce data"; }

  int64_t total = 0, used = 0;
  ASSERT_NO_FATAL_FAILURE(NodeGetVolumeStats(target, &total, &used));
  EXPECT_GT(used, 0);

  CloudGrowsTheDisk(kGrownBytes);
  int64_t disk_bytes = 0;
  ASSERT_NO_FATAL_FAILURE(NodeExpand(target, &disk_bytes));
  EXPECT_EQ(disk_bytes, int64_t{kGrownBytes});
  int64_t grown = 0;
  ASSERT_NO_FATAL_FAILURE(NodeGetVolumeStats(target, &grown, &used));
  EXPECT_GT(grown, total + int64_t{400 * kMiB});

  ASSERT_NO_FATAL_FAILURE(NodeUnpublish(target));
  ASSERT_NO_FATAL_FAILURE(NodeUnstage(staging));
  ExpectUnstaged(staging, /*offline=*/true);  // until the next stage brings it online

  // The next stage, on this node, of the offline disk: PartitionDisk (partitioned: nothing to do), then online.
  node_.KubeletMakesDir(staging);
  ASSERT_NO_FATAL_FAILURE(NodeStage(staging));
  const std::string target2 = node_.PublishPath("pod-2", "pv-gce");
  node_.KubeletMakesDir(std::filesystem::path(target2).parent_path());
  ASSERT_NO_FATAL_FAILURE(NodePublish(staging, target2));
  EXPECT_EQ(ReadText(target2 + "/written-by-pod-1.txt"), "gce data");
  ASSERT_NO_FATAL_FAILURE(NodeUnpublish(target2));
  ASSERT_NO_FATAL_FAILURE(NodeUnstage(staging));
  EXPECT_FALSE(CsiNode::AnythingOfDiskMounted(*disk_));
}

// While offline, nothing uses the disk: the host refuses to mount it, as Windows keeps an offline disk's volumes
// away, until SetDiskState(online). The state survives a restart of the proxy.
TEST_F(GcePd, AnOfflineDiskIsNotMountedUntilItIsOnlineAgainAlsoAfterAProxyRestart) {
  const std::string staging = node_.StagingPath("pd.csi.storage.gke.io", "pv-gce-offline");
  node_.KubeletMakesDir(staging);
  ASSERT_NO_FATAL_FAILURE(NodeStage(staging));
  ASSERT_NO_FATAL_FAILURE(NodeUnstage(staging));
  node_.KubeletMakesDir(staging);

  ASSERT_EQ(node_.Stop(), 0);
  ASSERT_TRUE(node_.Start()) << node_.error();
  std::vector<std::string> volumes;
  ASSERT_OK(node_.ListVolumesOnDisk(disk_->DiskNumber(), &volumes));
  ASSERT_EQ(volumes.size(), 1u);
  auto status = node_.MountVolume(volumes[0], staging);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find("offline"), std::string::npos) << status.error_message();
  EXPECT_FALSE(CsiNode::AnythingOfDiskMounted(*disk_));
  ASSERT_NO_FATAL_FAILURE(NodeStage(staging));  // PartitionDisk, SetDiskState(online), ..., MountVolume
  ASSERT_NO_FATAL_FAILURE(NodeUnstage(staging));
}

}  // namespace
}  // namespace csi_proxy::testing::drivers

// The vSphere driver (its Windows node code, with csi-proxy's method names; since 2025 it links the v2 library
// instead of dialling the pipes), as its node server and Windows utilities order the calls:
// pkg/csi/service/node.go, pkg/csi/service/osutils/windows_os_utils.go, pkg/csi/service/mounter/mounter_windows.go.
// Its unstage ends with SetDiskState(offline), its expansion brings the disk online first (issue 22).
#include <sys/stat.h>

#include "csi_node.h"

namespace csi_proxy::testing::drivers {
namespace {

class Vsphere : public BlockDriverTest {
 protected:
  // GetDiskNumber: ListDiskIDs, the disk whose Page83 equals the disk id from the publish context. A loop disk has
  // no page 0x83: the match runs against a recorded SCSI disk (DriverDiskLookup.VsphereFindsItsDiskByThePage83Naa).
  uint32_t GetDiskNumber() {
    EXPECT_TRUE(node_.ListDiskIDs().ok());
    return disk_->DiskNumber();
  }

  // NodeStageVolume -> NodeStageBlockVolume: GetDiskNumber; haveMountPoint (a local os.Lstat: "Not using CSI proxy
  // IsSymlink()"); FormatAndMount (above).
  void NodeStage(const std::string& staging) {
    const uint32_t disk = GetDiskNumber();
    struct stat st {};
    ASSERT_EQ(lstat(staging.c_str(), &st), 0);
    ASSERT_FALSE(S_ISLNK(st.st_mode));
    ASSERT_NO_FATAL_FAILURE(FormatAndMount(node_, disk, staging));
  }

  // NodePublishVolume -> PublishMountVol: PreparePublishPath (PathExists, Rmdir force when there, Mkdir of the
  // parent), Mount = CreateSymlink.
  void NodePublish(const std::string& staging, const std::string& target) {
    bool exists = true;
    ASSERT_OK(node_.PathExists(target, &exists));
    if (exists) ASSERT_OK(node_.Rmdir(target, true));
    ASSERT_OK(node_.Mkdir(std::filesystem::path(target).parent_path()));
    ASSERT_OK(node_.CreateSymlink(staging, target));
  }

  // NodeGetVolumeStats -> GetMetrics -> StatFS: GetVolumeIDFromTargetPath, GetVolumeStats.
  void NodeGetVolumeStats(const std::string& path, int64_t* total) {
    std::string volume;
    ASSERT_OK(node_.GetVolumeIDFromTargetPath(path, &volume));
    ASSERT_OK(node_.GetVolumeStats(volume, total));
  }

  // NodeExpandVolume: GetDevFromMount (GetVolumeIDFromTargetPath); with online extension, GetBlockSizeBytes
  // (GetVolumeStats) and Rescan when smaller than the request; ResizeVolume: GetDiskTotalBytes
  // (GetDiskNumberFromVolumeID, GetDiskStats), and unless the disk is within 1 MiB of the request,
  // GetDiskNumberFromVolumeID, SetDiskState(online), ResizeVolume(volume, 0).
  void NodeExpand(const std::string& volume_path, int64_t request_bytes) {
    std::string volume;
    ASSERT_OK(node_.GetVolumeIDFromTargetPath(volume_path, &volume));
    int64_t current = 0;
    ASSERT_OK(node_.GetVolumeStats(volume, &current));
    if (current < request_bytes) ASSERT_OK(node_.Rescan());
    uint32_t disk = 0;
    int64_t disk_bytes = 0;
    ASSERT_OK(node_.GetDiskNumberFromVolumeID(volume, &disk));
    ASSERT_OK(node_.GetDiskStats(disk, &disk_bytes));
    if (request_bytes - disk_bytes < int64_t{1 << 20}) return;
    ASSERT_OK(node_.GetDiskNumberFromVolumeID(volume, &disk));
    ASSERT_OK(node_.SetDiskState(disk, true));
    ASSERT_OK(node_.ResizeVolume(volume, 0));
  }

  // NodeUnpublishVolume -> CleanupPublishPath: Rmdir(target, force).
  void NodeUnpublish(const std::string& target) { ASSERT_OK(node_.Rmdir(target, true)); }

  // NodeUnstageVolume -> CleanupStagePath -> Unmount (UnmountAndTakeOffline above).
  void NodeUnstage(const std::string& staging) { ASSERT_NO_FATAL_FAILURE(UnmountAndTakeOffline(node_, staging)); }
};

TEST_F(Vsphere, EveryNodeCallCompletesTheDiskGoesOfflineAndStagesAgainWithItsData) {
  const std::string staging = node_.StagingPath("csi.vsphere.vmware.com", "pv-vsphere");
  const std::string target = node_.PublishPath("pod-1", "pv-vsphere");
  node_.KubeletMakesDir(staging);
  ASSERT_NO_FATAL_FAILURE(NodeStage(staging));
  ASSERT_NO_FATAL_FAILURE(NodePublish(staging, target));
  { std::ofstream(target + "/written-by-pod-1.txt") << "vsphere data"; }
  int64_t total = 0;
  ASSERT_NO_FATAL_FAILURE(NodeGetVolumeStats(target, &total));
  EXPECT_GT(total, int64_t{400 * kMiB});

  // The PVC asks for more than the controller has grown the disk to yet: the driver grows what there is.
  CloudGrowsTheDisk(kGrownBytes);
  ASSERT_NO_FATAL_FAILURE(NodeExpand(target, 1280 * kMiB));
  int64_t grown = 0;
  ASSERT_NO_FATAL_FAILURE(NodeGetVolumeStats(target, &grown));
  EXPECT_GT(grown, total + int64_t{400 * kMiB});

  ASSERT_NO_FATAL_FAILURE(NodeUnpublish(target));
  ASSERT_NO_FATAL_FAILURE(NodeUnstage(staging));
  ExpectUnstaged(staging, /*offline=*/true);

  node_.KubeletMakesDir(staging);
  ASSERT_NO_FATAL_FAILURE(NodeStage(staging));
  const std::string target2 = node_.PublishPath("pod-2", "pv-vsphere");
  ASSERT_NO_FATAL_FAILURE(NodePublish(staging, target2));
  EXPECT_EQ(ReadText(target2 + "/written-by-pod-1.txt"), "vsphere data");
  ASSERT_NO_FATAL_FAILURE(NodeUnpublish(target2));
  ASSERT_NO_FATAL_FAILURE(NodeUnstage(staging));
}

}  // namespace
}  // namespace csi_proxy::testing::drivers

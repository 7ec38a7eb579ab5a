// The AWS EBS driver over named pipes (v1), as its node server and Windows mounter order the calls:
// pkg/driver/node.go, pkg/mounter/mount_windows.go, pkg/mounter/mount_windows_proxyV1.go. Its unstage ends with
// SetDiskState(offline) on an NVMe disk (every EBS volume of a Nitro instance), which needs the host's offline
// state (issue 22). It refuses a StorageClass's format options "because csi-proxy does not allow supplying format
// arguments": FormatVolume's own fields now carry them (the second test).
#include <sys/statvfs.h>

#include "csi_node.h"

namespace csi_proxy::testing::drivers {
namespace {

class Ebs : public BlockDriverTest {
 protected:
  // FindDevicePath: a new disk client per call, ListDiskIDs, the disk whose SerialNumber contains the volume id
  // without its dash. A loop disk has no serial: the match itself runs against a recorded NVMe disk
  // (DriverDiskLookup.EbsFindsItsVolumeByTheSerialNumber).
  uint32_t FindDevicePath() {
    auto fresh = Dial(node_.host().endpoint("csi-proxy-disk-v1"));  // a new client, as the driver makes one
    v1::ListDiskIDsRequest req;
    v1::ListDiskIDsResponse resp;
    EXPECT_TRUE(Call(fresh, "/v1.Disk/ListDiskIDs", req, &resp).ok());
    return disk_->DiskNumber();
  }

  // NodeStageVolume: FindDevicePath; PathExists(staging), MakeDir when missing; GetDeviceNameFromMount
  // (GetVolumeIDFromTargetPath: not mounted yet, an error the driver expects);
  // FormatAndMountSensitiveWithFormatOptions (FormatAndMount above); NeedResize (Rescan, GetDiskStats,
  // GetVolumeIDFromTargetPath, GetVolumeStats) and Resize when the disk exceeds the filesystem (Rescan,
  // GetVolumeIDFromTargetPath, ResizeVolume). `format_options`: what the driver builds from the StorageClass, sent in
  // FormatVolume's own fields.
  void NodeStage(const std::string& staging, const std::string& fs_type = "",
                 const std::vector<std::string>& format_options = {}) {
    const uint32_t disk = FindDevicePath();
    bool exists = false;
    ASSERT_OK(node_.PathExists(staging, &exists));
    if (!exists) ASSERT_OK(node_.Mkdir(staging));
    std::string mounted_volume;
    EXPECT_EQ(node_.GetVolumeIDFromTargetPath(staging, &mounted_volume).error_code(), grpc::StatusCode::NOT_FOUND);
    ASSERT_NO_FATAL_FAILURE(FormatAndMount(node_, disk, staging, fs_type, format_options));
    ASSERT_NO_FATAL_FAILURE(ResizeWhenNeeded(disk, staging));
  }

  void ResizeWhenNeeded(uint32_t disk, const std::string& staging) {
    ASSERT_OK(node_.Rescan());
    int64_t disk_bytes = 0, fs_bytes = 0;
    ASSERT_OK(node_.GetDiskStats(disk, &disk_bytes));
    std::string volume;
    ASSERT_OK(node_.GetVolumeIDFromTargetPath(staging, &volume));
    ASSERT_OK(node_.GetVolumeStats(volume, &fs_bytes));
    if (disk_bytes > fs_bytes) {
      ASSERT_OK(node_.Rescan());
      ASSERT_OK(node_.GetVolumeIDFromTargetPath(staging, &volume));
      ASSERT_OK(node_.ResizeVolume(volume, 0));
    }
  }

  // NodePublishVolume: PreparePublishTarget (PathExists, Rmdir force when there), Mount = CreateSymlink.
  void NodePublish(const std::string& staging, const std::string& target) {
    bool exists = true;
    ASSERT_OK(node_.PathExists(target, &exists));
    if (exists) ASSERT_OK(node_.Rmdir(target, true));
    ASSERT_OK(node_.CreateSymlink(staging, target));
  }

  // NodeExpandVolume: GetDeviceNameFromMount (GetVolumeIDFromTargetPath, GetDiskNumberFromVolumeID),
  // FindDevicePath, Resize (Rescan, GetVolumeIDFromTargetPath, ResizeVolume), GetBlockSizeBytes (GetDiskStats).
  void NodeExpand(const std::string& volume_path, int64_t* capacity) {
    std::string volume;
    uint32_t disk = 0;
    ASSERT_OK(node_.GetVolumeIDFromTargetPath(volume_path, &volume));
    ASSERT_OK(node_.GetDiskNumberFromVolumeID(volume, &disk));
    EXPECT_EQ(FindDevicePath(), disk);
    ASSERT_OK(node_.Rescan());
    ASSERT_OK(node_.GetVolumeIDFromTargetPath(volume_path, &volume));
    ASSERT_OK(node_.ResizeVolume(volume, 0));
    ASSERT_OK(node_.GetDiskStats(disk, capacity));
  }

  // NodeUnpublishVolume: Unpublish = Rmdir(target, force).
  void NodeUnpublish(const std::string& target) { ASSERT_OK(node_.Rmdir(target, true)); }

  // NodeUnstageVolume: GetDeviceNameFromMount (GetVolumeIDFromTargetPath, GetDiskNumberFromVolumeID), then
  // Unstage = Unmount (UnmountAndTakeOffline above).
  void NodeUnstage(const std::string& staging) {
    std::string volume;
    uint32_t disk = 0;
    ASSERT_OK(node_.GetVolumeIDFromTargetPath(staging, &volume));
    ASSERT_OK(node_.GetDiskNumberFromVolumeID(volume, &disk));
    ASSERT_NO_FATAL_FAILURE(UnmountAndTakeOffline(node_, staging));
  }
};

TEST_F(Ebs, EveryNodeCallCompletesTheDiskGoesOfflineAndStagesAgainWithItsData) {
  const std::string staging = node_.StagingPath("ebs.csi.aws.com", "pv-ebs");
  const std::string target = node_.PublishPath("pod-1", "pv-ebs");
  ASSERT_NO_FATAL_FAILURE(NodeStage(staging));  // the driver makes the staging directory itself
  node_.KubeletMakesDir(std::filesystem::path(target).parent_path());
  ASSERT_NO_FATAL_FAILURE(NodePublish(staging, target));
  { std::ofstream(target + "/written-by-pod-1.txt") << "ebs data"; }

  // NodeGetVolumeStats: PathExists, then the driver's own GetDiskFreeSpaceEx of the path (statfs here).
  bool exists = false;
  ASSERT_OK(node_.PathExists(target, &exists));
  EXPECT_TRUE(exists);
  struct statvfs before {};
  ASSERT_EQ(statvfs(target.c_str(), &before), 0);

  CloudGrowsTheDisk(kGrownBytes);
  int64_t capacity = 0;
  ASSERT_NO_FATAL_FAILURE(NodeExpand(target, &capacity));
  EXPECT_EQ(capacity, int64_t{kGrownBytes});
  struct statvfs after {};
  ASSERT_EQ(statvfs(target.c_str(), &after), 0);
  EXPECT_GT(after.f_blocks * after.f_frsize, before.f_blocks * before.f_frsize + 400 * kMiB);

  ASSERT_NO_FATAL_FAILURE(NodeUnpublish(target));
  ASSERT_NO_FATAL_FAILURE(NodeUnstage(staging));
  ExpectUnstaged(staging, /*offline=*/true);

  ASSERT_NO_FATAL_FAILURE(NodeStage(staging));
  const std::string target2 = node_.PublishPath("pod-2", "pv-ebs");
  node_.KubeletMakesDir(std::filesystem::path(target2).parent_path());
  ASSERT_NO_FATAL_FAILURE(NodePublish(staging, target2));
  EXPECT_EQ(ReadText(target2 + "/written-by-pod-1.txt"), "ebs data");
  ASSERT_NO_FATAL_FAILURE(NodeUnpublish(target2));
  ASSERT_NO_FATAL_FAILURE(NodeUnstage(staging));
}

// The StorageClass parameters blockSize, bytesPerInode and numberOfInodes become mke2fs' -b, -i and -N in the
// driver (pkg/driver/node.go); sent in FormatVolume's own fields (with the StorageClass's fstype, ext4), they reach
// mkfs.
TEST_F(Ebs, AStorageClassesFormatOptionsReachMkfsThroughFormatVolumesOwnFields) {
  const std::string staging = node_.StagingPath("ebs.csi.aws.com", "pv-ebs-options");
  ASSERT_NO_FATAL_FAILURE(NodeStage(staging, "ext4", {"-b", "1024", "-i", "8192", "-N", "20000"}));
  struct statvfs vfs {};
  ASSERT_EQ(statvfs(staging.c_str(), &vfs), 0);
  EXPECT_EQ(vfs.f_bsize, 1024u) << "-b 1024";
  EXPECT_NEAR(static_cast<double>(vfs.f_files), 20000.0, 1000.0) << "-N 20000 (rounded to whole inode tables)";
  ASSERT_NO_FATAL_FAILURE(NodeUnstage(staging));

  LoopDevice other(64 * kMiB);
  ASSERT_OK(node_.PartitionDisk(other.DiskNumber()));
  auto status = node_.FormatVolume(other.PartitionPath(1), "ext4", {"-E", "stride=4,offset=4096"});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("\"offset\""), std::string::npos) << status.error_message();
}

}  // namespace
}  // namespace csi_proxy::testing::drivers

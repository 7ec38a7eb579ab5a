// NetApp Trident's SMB volumes on Windows, as its node code orders the calls: core/node/mount.go,
// core/node/detach.go, core/node/unmount.go, utils/mount/mount_windows.go, utils/csiutils/csiutils_windows.go,
// utils/filesystem/filesystem_windows.go. It removes a share's mapping at every unstage, whoever else uses the
// share; here the mapping stays while another volume's link uses it (issue 22).
#include "smb_driver_test.h"

namespace csi_proxy::testing::drivers {
namespace {

class Trident : public SmbDriverTest {
 protected:
  // NodeStageVolume (attach): MountSMBPath: PathExists(staging), Rmdir(force) when there, PathExists(parent),
  // Mkdir(parent) when missing, NewSmbGlobalMapping{LocalPath: staging}.
  void NodeStage(const std::string& volume, const std::string& staging) {
    bool exists = false;
    ASSERT_OK(node_->PathExists(staging, &exists));
    if (exists) ASSERT_OK(node_->Rmdir(staging, true));
    ASSERT_OK(node_->PathExists(std::filesystem::path(staging).parent_path(), &exists));
    if (!exists) ASSERT_OK(node_->Mkdir(std::filesystem::path(staging).parent_path()));
    ASSERT_OK(node_->NewSmbGlobalMapping(Source(volume), staging, server_->username(), server_->password()));
  }
  // NodePublishVolume: WindowsBindMount: Rmdir(target, force), Mount = CreateSymlink.
  void NodePublish(const std::string& staging, const std::string& target) {
    ASSERT_OK(node_->Rmdir(target, true));
    ASSERT_OK(node_->CreateSymlink(staging, target));
  }
  // NodeUnpublishVolume: IsLikelyNotMountPoint (PathExists, IsSymlink), Umount = Rmdir(target, force).
  void NodeUnpublish(const std::string& target) {
    bool exists = false, link = false;
    ASSERT_OK(node_->PathExists(target, &exists));
    ASSERT_TRUE(exists);
    ASSERT_OK(node_->IsSymlink(target, &link));
    ASSERT_TRUE(link);
    ASSERT_OK(node_->Rmdir(target, true));
  }
  // NodeUnstageVolume (detachSMBVolume): UmountSMBPath = Rmdir(staging, force), RemoveSmbGlobalMapping(mapping path).
  void NodeUnstage(const std::string& staging) {
    ASSERT_OK(node_->Rmdir(staging, true));
    ASSERT_OK(node_->RemoveSmbGlobalMapping(MappingPath()));
  }
};

TEST_F(Trident, UnstagingOneVolumeLeavesTheShareMappedForAnotherAndTheLastUnmapsIt) {
  const auto [a, b] = TwoVolumes("csi.trident.netapp.io", /*kubelet_makes_staging=*/false);
  const std::string &staging_a = a.staging, &staging_b = b.staging, &target_a = a.target, &target_b = b.target;

  ASSERT_NO_FATAL_FAILURE(NodeStage("pvc-a", staging_a));
  ASSERT_NO_FATAL_FAILURE(NodeStage("pvc-b", staging_b));
  ASSERT_NO_FATAL_FAILURE(NodePublish(staging_a, target_a));
  ASSERT_NO_FATAL_FAILURE(NodePublish(staging_b, target_b));
  PodWrites(target_a, "pvc-a", "written by pod a");
  PodWrites(target_b, "pvc-b", "written by pod b");

  // NodeGetVolumeStats: GetFilesystemStats = GetVolumeIDFromTargetPath, GetVolumeStats. An SMB path has no block
  // volume, on Windows (no volume GUID for a UNC path) as here (the link leads into the SMB mount root, which the
  // volume group does not follow): the call answers an error on both, and kubelet gets no statistics.
  std::string volume;
  EXPECT_FALSE(node_->GetVolumeIDFromTargetPath(target_a, &volume).ok());

  ASSERT_NO_FATAL_FAILURE(NodeUnpublish(target_a));
  ASSERT_NO_FATAL_FAILURE(NodeUnstage(staging_a));  // Rmdir, then RemoveSmbGlobalMapping: answered OK
  EXPECT_TRUE(ShareMapped()) << "pod b still uses the share: RemoveSmbGlobalMapping left it mapped";
  PodWrites(target_b, "pvc-b", "pod b goes on writing");

  ASSERT_NO_FATAL_FAILURE(NodeUnpublish(target_b));
  ASSERT_NO_FATAL_FAILURE(NodeUnstage(staging_b));
  EXPECT_FALSE(ShareMapped());
  EXPECT_FALSE(CsiNode::Exists(MountPoint()));

  ASSERT_NO_FATAL_FAILURE(NodeStage("pvc-a", staging_a));
  EXPECT_EQ(ReadText(staging_a + "/pvc-a.txt"), "written by pod a");
  ASSERT_NO_FATAL_FAILURE(NodeUnstage(staging_a));
  EXPECT_FALSE(ShareMapped());
}

}  // namespace
}  // namespace csi_proxy::testing::drivers

// azurefile-csi-driver in csi-proxy mode, as its node server and Windows mounter order the calls:
// pkg/azurefile/nodeserver.go, pkg/azurefile/azure_common_windows.go, pkg/mounter/safe_mounter_windows.go. It never
// calls RemoveSmbGlobalMapping: it unstages by removing the staging link. Here the removal of a mapping's last link
// unmaps it (issue 22), and never while another volume's link uses the share.
#include "smb_driver_test.h"

namespace csi_proxy::testing::drivers {
namespace {

class AzureFile : public SmbDriverTest {
 protected:
  // NodeStageVolume and NodePublishVolume: SmbStage and SmbPublish (the code azurefile shares with csi-driver-smb).
  void NodeStage(const std::string& volume, const std::string& staging) { SmbStage(volume, staging); }
  void NodePublish(const std::string& staging, const std::string& target) { SmbPublish(staging, target); }
  // NodeUnpublishVolume: CleanupMountPoint = Rmdir(target, force). NodeUnstageVolume: SMBUnmount = Rmdir(staging,
  // force) (the HostProcess mode, not this one, removes mappings).
  void NodeUnpublish(const std::string& target) { ASSERT_OK(node_->Rmdir(target, true)); }
  void NodeUnstage(const std::string& staging) { ASSERT_OK(node_->Rmdir(staging, true)); }
};

TEST_F(AzureFile, AShareStaysMappedWhileAVolumeUsesItAndGoesWithItsLastLink) {
  const auto [a, b] = TwoVolumes("file.csi.azure.com", /*kubelet_makes_staging=*/true);
  const std::string &staging_a = a.staging, &staging_b = b.staging, &target_a = a.target, &target_b = b.target;

  ASSERT_NO_FATAL_FAILURE(NodeStage("pvc-a", staging_a));
  ASSERT_NO_FATAL_FAILURE(NodeStage("pvc-b", staging_b));
  ASSERT_NO_FATAL_FAILURE(NodePublish(staging_a, target_a));
  ASSERT_NO_FATAL_FAILURE(NodePublish(staging_b, target_b));
  PodWrites(target_a, "pvc-a", "written by pod a");
  PodWrites(target_b, "pvc-b", "written by pod b");
  EXPECT_GT(StatfsTotal(target_b), 0);  // NodeGetVolumeStats: the driver's own GetFreeSpace of the path

  ASSERT_NO_FATAL_FAILURE(NodeUnpublish(target_a));
  ASSERT_NO_FATAL_FAILURE(NodeUnstage(staging_a));
  EXPECT_TRUE(ShareMapped()) << "pod b still uses the share";
  PodWrites(target_b, "pvc-b", "pod b goes on writing");

  ASSERT_NO_FATAL_FAILURE(NodeUnpublish(target_b));
  ASSERT_NO_FATAL_FAILURE(NodeUnstage(staging_b));
  EXPECT_FALSE(ShareMapped()) << "the last link is gone: no mapping is left behind";

  node_->KubeletMakesDir(staging_b);
  ASSERT_NO_FATAL_FAILURE(NodeStage("pvc-b", staging_b));
  EXPECT_EQ(ReadText(staging_b + "/pvc-b.txt"), "pod b goes on writing");
  ASSERT_NO_FATAL_FAILURE(NodeUnstage(staging_b));
  EXPECT_FALSE(ShareMapped());
}

}  // namespace
}  // namespace csi_proxy::testing::drivers

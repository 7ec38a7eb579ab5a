// csi-driver-smb in csi-proxy mode (removeSMBMappingDuringUnmount: true), as its node server and Windows mounter
// order the calls: pkg/smb/nodeserver.go, pkg/smb/smb_common_windows.go, pkg/mounter/safe_mounter_windows.go,
// pkg/mounter/refcounter_windows.go. The driver counts the volumes of a share in files of its own and calls
// RemoveSmbGlobalMapping when its count reaches 0, before it removes the staging link. Here the server counts too
// (issue 22): the mapping stays while the link exists and goes with the link's removal.
#include <set>

#include "smb_driver_test.h"

namespace csi_proxy::testing::drivers {
namespace {

class CsiDriverSmb : public SmbDriverTest {
 protected:
  // NodeStageVolume: SmbStage (under the driver's lock of the mapping), then the driver's reference file for the
  // volume. NodePublishVolume: SmbPublish.
  void NodeStage(const std::string& volume, const std::string& staging) {
    ASSERT_NO_FATAL_FAILURE(SmbStage(volume, staging));
    driver_references_.insert(volume);
  }
  void NodePublish(const std::string& staging, const std::string& target) { SmbPublish(staging, target); }

  // NodeUnpublishVolume: CleanupMountPoint = Rmdir(target, force).
  void NodeUnpublish(const std::string& target) { ASSERT_OK(node_->Rmdir(target, true)); }

  // NodeUnstageVolume: CleanupSMBMountPoint = SMBUnmount: os.Readlink(staging) in the driver's container (a UNC
  // path on Windows; here the mapping's directory on the host, so a Linux port keeps the source it staged), the
  // driver's reference file removed, RemoveSmbGlobalMapping when none is left, then Rmdir(staging, force).
  void NodeUnstage(const std::string& volume, const std::string& staging) {
    char link[4096];
    ASSERT_GT(readlink(staging.c_str(), link, sizeof link), 0);
    driver_references_.erase(volume);
    if (driver_references_.empty()) ASSERT_OK(node_->RemoveSmbGlobalMapping(Source(volume)));
    ASSERT_OK(node_->Rmdir(staging, true));
  }

  std::set<std::string> driver_references_;  // the driver's reference files of the share (one per volume id)
};

TEST_F(CsiDriverSmb, TwoVolumesOfOneShareEachStageAndUnstageAndTheMappingGoesWithTheLast) {
  const auto [a, b] = TwoVolumes("smb.csi.k8s.io", /*kubelet_makes_staging=*/true);
  const std::string &staging_a = a.staging, &staging_b = b.staging, &target_a = a.target, &target_b = b.target;

  ASSERT_NO_FATAL_FAILURE(NodeStage("pvc-a", staging_a));
  ASSERT_NO_FATAL_FAILURE(NodeStage("pvc-b", staging_b));
  ASSERT_NO_FATAL_FAILURE(NodePublish(staging_a, target_a));
  ASSERT_NO_FATAL_FAILURE(NodePublish(staging_b, target_b));
  PodWrites(target_a, "pvc-a", "written by pod a");
  PodWrites(target_b, "pvc-b", "written by pod b");
  EXPECT_GT(StatfsTotal(target_a), 0);

  ASSERT_NO_FATAL_FAILURE(NodeUnpublish(target_a));
  ASSERT_NO_FATAL_FAILURE(NodeUnstage("pvc-a", staging_a));
  EXPECT_FALSE(CsiNode::Exists(staging_a));
  EXPECT_TRUE(ShareMapped()) << "pod b still uses the share";
  PodWrites(target_b, "pvc-b", "pod b goes on writing");

  // The driver's count reaches 0: it removes the mapping while its staging link still exists, then the link.
  ASSERT_NO_FATAL_FAILURE(NodeUnpublish(target_b));
  ASSERT_NO_FATAL_FAILURE(NodeUnstage("pvc-b", staging_b));
  EXPECT_FALSE(ShareMapped()) << "the last link is gone: no mapping is left behind";
  EXPECT_FALSE(CsiNode::Exists(MountPoint()));

  // The volume stages again with its data.
  node_->KubeletMakesDir(staging_a);
  ASSERT_NO_FATAL_FAILURE(NodeStage("pvc-a", staging_a));
  EXPECT_EQ(ReadText(staging_a + "/pvc-a.txt"), "written by pod a");
  ASSERT_NO_FATAL_FAILURE(NodeUnstage("pvc-a", staging_a));
  EXPECT_FALSE(ShareMapped());
}

}  // namespace
}  // namespace csi_proxy::testing::drivers

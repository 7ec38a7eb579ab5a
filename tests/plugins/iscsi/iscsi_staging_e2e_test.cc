// A CSI driver's NodeStageVolume for an iSCSI volume, end to end through the real host and its sockets, on a real
// kernel initiator: the iSCSI group logs in to a real target (tgtd on loopback), the disk group finds, identifies
// and partitions the disk it brought, the volume group formats and mounts it, and the pod's data lands on the
// target's LUN. Needs iscsi_tcp, a running iscsid and tgtd: this runs in the VM lane (tests/vm/README.md) and
// skips elsewhere with a message naming what is missing.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "file_tree.h"
#include "grpc_client.h"
#include "host_process.h"
#include "iscsi_backend_linux.h"
#include "tgt_target.h"
#include "v1/disk.pb.h"
#include "v1/volume.pb.h"
#include "v1alpha2/iscsi.pb.h"

namespace csi_proxy::testing {
namespace {

namespace fs = std::filesystem;
using test_support::TgtTarget;
using test_support::TgtTargetOptions;

constexpr const char* kIscsi = "csi-proxy-iscsi-v1alpha2";
constexpr const char* kDisk = "csi-proxy-disk-v1";
constexpr const char* kVolume = "csi-proxy-volume-v1";
constexpr const char* kNodeDb = "/etc/iscsi/nodes";

// Every file of open-iscsi's node database that mentions `iqn` or holds `secret`.
std::vector<std::string> NodeRecordsMentioning(const std::string& iqn, const std::string& secret) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::exists(kNodeDb, ec)) return out;
  for (auto it = fs::recursive_directory_iterator(kNodeDb, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const std::string path = it->path().string();
    if (path.find(iqn) != std::string::npos) out.push_back(path);
    if (it->is_regular_file() && ReadFile(path).find(secret) != std::string::npos) out.push_back(path);
  }
  return out;
}

class IscsiStaging : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Status s = iscsi::EnsureKernelInitiator("/sys"); !s.ok()) GTEST_SKIP() << s.message();
    if (Status s = iscsi::CheckIscsidRunning(); !s.ok()) GTEST_SKIP() << s.message();
    StartHost();
  }

  void StartHost(const std::string& iscsi_keys = "") {
    channel_.reset();
    disk_.reset();
    volume_.reset();
    host_.reset();
    host_ = std::make_unique<HostProcess>("[groups.iscsi]\nrequired = true\ninitiator_name = \"" + kInitiator + "\"\n" +
                                              iscsi_keys + "[groups.disk]\nrequired = true\n[groups.volume]\n" +
                                              "required = true\ndefault_fs_type = \"ext4\"\n",
                                          "state_dir = \"" + state_.path() + "\"\n");
    ASSERT_TRUE(host_->Start({kIscsi, kDisk, kVolume})) << host_->error() << host_->log();
    channel_ = Dial(host_->endpoint(kIscsi));
    disk_ = Dial(host_->endpoint(kDisk));
    volume_ = Dial(host_->endpoint(kVolume));
  }

  std::unique_ptr<TgtTarget> StartTarget(const TgtTargetOptions& options) {
    std::string why_not;
    auto target = TgtTarget::Start(options, &why_not);
    EXPECT_NE(target, nullptr) << "no iSCSI target: " << why_not;
    return target;
  }

  static v1alpha2::TargetPortal Portal(const TgtTarget& target) {
    v1alpha2::TargetPortal p;
    p.set_target_address(target.address());
    p.set_target_port(target.port());
    return p;
  }

  grpc::Status AddPortal(const v1alpha2::TargetPortal& portal) {
    v1alpha2::AddTargetPortalRequest req;
    *req.mutable_target_portal() = portal;
    v1alpha2::AddTargetPortalResponse resp;
    return Call(channel_, "/v1alpha2.Iscsi/AddTargetPortal", req, &resp);
  }
  grpc::Status Discover(const v1alpha2::TargetPortal& portal, std::vector<std::string>* iqns) {
    v1alpha2::DiscoverTargetPortalRequest req;
    *req.mutable_target_portal() = portal;
    v1alpha2::DiscoverTargetPortalResponse resp;
    auto s = Call(channel_, "/v1alpha2.Iscsi/DiscoverTargetPortal", req, &resp);
    iqns->assign(resp.iqns().begin(), resp.iqns().end());
    return s;
  }
  grpc::Status Connect(const v1alpha2::TargetPortal& portal, const std::string& iqn, v1alpha2::AuthenticationType auth,
                       const std::string& user, const std::string& secret) {
    v1alpha2::ConnectTargetRequest req;
    *req.mutable_target_portal() = portal;
    req.set_iqn(iqn);
    req.set_auth_type(auth);
    req.set_chap_username(user);
    req.set_chap_secret(secret);
    v1alpha2::ConnectTargetResponse resp;
    return Call(channel_, "/v1alpha2.Iscsi/ConnectTarget", req, &resp, std::chrono::seconds(120));
  }
  grpc::Status Disconnect(const v1alpha2::TargetPortal& portal, const std::string& iqn) {
    v1alpha2::DisconnectTargetRequest req;
    *req.mutable_target_portal() = portal;
    req.set_iqn(iqn);
    v1alpha2::DisconnectTargetResponse resp;
    return Call(channel_, "/v1alpha2.Iscsi/DisconnectTarget", req, &resp, std::chrono::seconds(120));
  }
  std::vector<std::string> TargetDisks(const v1alpha2::TargetPortal& portal, const std::string& iqn) {
    v1alpha2::GetTargetDisksRequest req;
    *req.mutable_target_portal() = portal;
    req.set_iqn(iqn);
    v1alpha2::GetTargetDisksResponse resp;
    auto s = Call(channel_, "/v1alpha2.Iscsi/GetTargetDisks", req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return {resp.diskids().begin(), resp.diskids().end()};
  }
  // The disk a fresh login brought: the kernel scans the LUN asynchronously, so wait for it (bounded).
  std::vector<std::string> WaitForTargetDisks(const v1alpha2::TargetPortal& portal, const std::string& iqn) {
    std::vector<std::string> disks;
    for (int i = 0; i < 300 && disks.empty(); ++i) {
      disks = TargetDisks(portal, iqn);
      if (disks.empty()) usleep(100 * 1000);
    }
    return disks;
  }

  // NodeStageVolume and NodeUnstageVolume as a driver does them, on the disk `number` the login brought.
  void StageWriteUnstage(uint32_t number, const std::string& name) {
    v1::ListDiskIDsResponse ids;
    ASSERT_TRUE(Call(disk_, "/v1.Disk/ListDiskIDs", v1::ListDiskIDsRequest(), &ids).ok());
    ASSERT_TRUE(ids.diskids().count(number)) << "the disk group does not list disk " << number;
    EXPECT_FALSE(ids.diskids().at(number).page83().empty()) << "tgt's LUN reports a VPD page 0x83 designator";
    v1::ListDiskLocationsResponse locations;
    ASSERT_TRUE(Call(disk_, "/v1.Disk/ListDiskLocations", v1::ListDiskLocationsRequest(), &locations).ok());
    ASSERT_TRUE(locations.disk_locations().count(number)) << "no SCSI location for disk " << number;
    EXPECT_EQ(locations.disk_locations().at(number).lunid(), "1");  // tgt's first LUN

    v1::PartitionDiskRequest partition;
    partition.set_disk_number(number);
    v1::PartitionDiskResponse partition_resp;
    auto s = Call(disk_, "/v1.Disk/PartitionDisk", partition, &partition_resp);
    ASSERT_TRUE(s.ok()) << s.error_message() << host_->log();
    v1::ListVolumesOnDiskRequest list;
    list.set_disk_number(number);
    v1::ListVolumesOnDiskResponse volumes;
    // Read-your-writes: a listing that starts after PartitionDisk returned sees the new partition (it waits
    // while udev re-reads the table PartitionDisk wrote).
    s = Call(volume_, "/v1.Volume/ListVolumesOnDisk", list, &volumes);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ASSERT_EQ(volumes.volume_ids_size(), 1);
    const std::string volume = volumes.volume_ids(0);

    v1::FormatVolumeRequest format;
    format.set_volume_id(volume);
    v1::FormatVolumeResponse format_resp;
    s = Call(volume_, "/v1.Volume/FormatVolume", format, &format_resp, std::chrono::seconds(180));
    ASSERT_TRUE(s.ok()) << s.error_message() << host_->log();

    const std::string staging = host_->kubelet_dir() + "/plugins/kubernetes.io/csi/pv/" + name + "/globalmount";
    fs::create_directories(staging);
    v1::MountVolumeRequest mount;
    mount.set_volume_id(volume);
    mount.set_target_path(staging);
    v1::MountVolumeResponse mount_resp;
    s = Call(volume_, "/v1.Volume/MountVolume", mount, &mount_resp);
    ASSERT_TRUE(s.ok()) << s.error_message() << host_->log();
    { std::ofstream(staging + "/data.txt") << "staged on " << name; }
    EXPECT_EQ(ReadFile(staging + "/data.txt"), "staged on " + name);
    sync();

    v1::UnmountVolumeRequest unmount;
    unmount.set_volume_id(volume);
    unmount.set_target_path(staging);
    v1::UnmountVolumeResponse unmount_resp;
    s = Call(volume_, "/v1.Volume/UnmountVolume", unmount, &unmount_resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    if (!s.ok()) umount2(staging.c_str(), MNT_DETACH);
  }

  // Add, discover, connect, stage, write, unstage, disconnect: the whole life of one volume on `target`.
  void RunStaging(const TgtTarget& target, v1alpha2::AuthenticationType auth, const std::string& user,
                  const std::string& secret) {
    const auto portal = Portal(target);
    const std::string iqn = target.iqns()[0];
    ASSERT_TRUE(AddPortal(portal).ok());
    std::vector<std::string> iqns;
    auto s = Discover(portal, &iqns);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(iqns, target.iqns());
    s = Connect(portal, iqn, auth, user, secret);
    ASSERT_TRUE(s.ok()) << s.error_message() << "\n" << host_->log();
    EXPECT_TRUE(Connect(portal, iqn, auth, user, secret).ok()) << "a second connect is idempotent";
    auto disks = WaitForTargetDisks(portal, iqn);
    ASSERT_EQ(disks.size(), 1u) << "the login brought no disk";
    StageWriteUnstage(static_cast<uint32_t>(std::stoul(disks[0])), iqn.substr(iqn.rfind(':') + 1));
    s = Disconnect(portal, iqn);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_TRUE(TargetDisks(portal, iqn).empty());
    EXPECT_TRUE(NodeRecordsMentioning(iqn, secret.empty() ? "\x01" : secret).empty());
    if (!secret.empty()) {
      EXPECT_EQ(host_->log().find(secret), std::string::npos) << "a secret reached the log";
    }
  }

  const std::string kInitiator = "iqn.2024-01.io.k8s.csi-proxy.test:vm";
  TempDir state_;
  std::unique_ptr<HostProcess> host_;
  std::shared_ptr<grpc::Channel> channel_, disk_, volume_;
};

TEST_F(IscsiStaging, WithoutAuthenticationTheVolumeIsStagedAndUnstaged) {
  auto target = StartTarget(TgtTargetOptions{});
  ASSERT_NE(target, nullptr);
  RunStaging(*target, v1alpha2::NONE, "", "");
}

TEST_F(IscsiStaging, WithOneWayChapTheVolumeIsStagedAndUnstaged) {
  TgtTargetOptions options;
  options.iqns = {"iqn.2024-01.io.k8s.csi-proxy.test:chap"};
  options.chap_username = "chapuser";
  options.chap_secret = "Chap-Secret-One-Way-1";
  auto target = StartTarget(options);
  ASSERT_NE(target, nullptr);
  RunStaging(*target, v1alpha2::ONE_WAY_CHAP, options.chap_username, options.chap_secret);
}

TEST_F(IscsiStaging, WithMutualChapTheVolumeIsStagedAndUnstaged) {
  StartHost("mutual_chap_username = \"targetuser\"\n");
  TgtTargetOptions options;
  options.iqns = {"iqn.2024-01.io.k8s.csi-proxy.test:mutual"};
  options.chap_username = "chapuser";
  options.chap_secret = "Chap-Secret-Mutual-1";
  options.mutual_chap_username = "targetuser";
  options.mutual_chap_secret = "Target-Secret-Mutual-1";
  auto target = StartTarget(options);
  ASSERT_NE(target, nullptr);
  v1alpha2::SetMutualChapSecretRequest secret;
  secret.set_mutualchapsecret(options.mutual_chap_secret);
  v1alpha2::SetMutualChapSecretResponse secret_resp;
  ASSERT_TRUE(Call(channel_, "/v1alpha2.Iscsi/SetMutualChapSecret", secret, &secret_resp).ok());
  RunStaging(*target, v1alpha2::MUTUAL_CHAP, options.chap_username, options.chap_secret);
  EXPECT_EQ(host_->log().find(options.mutual_chap_secret), std::string::npos);
}

// A driver must tell bad credentials from a broken node: PERMISSION_DENIED, no session, and no node record (the
// only place open-iscsi keeps the secret) left behind.
TEST_F(IscsiStaging, AWrongChapSecretIsPermissionDeniedAndLeavesNoSessionAndNoRecord) {
  TgtTargetOptions options;
  options.iqns = {"iqn.2024-01.io.k8s.csi-proxy.test:wrongchap"};
  options.chap_username = "chapuser";
  options.chap_secret = "Chap-Secret-Right-1";
  auto target = StartTarget(options);
  ASSERT_NE(target, nullptr);
  const auto portal = Portal(*target);
  const std::string iqn = options.iqns[0];
  const std::string wrong = "Chap-Secret-Wrong-" + std::to_string(getpid());
  ASSERT_TRUE(AddPortal(portal).ok());
  auto s = Connect(portal, iqn, v1alpha2::ONE_WAY_CHAP, options.chap_username, wrong);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_NE(s.error_message().find("authorization failure"), std::string::npos) << s.error_message();
  EXPECT_EQ(s.error_message().find(wrong), std::string::npos);
  EXPECT_TRUE(TargetDisks(portal, iqn).empty());
  EXPECT_TRUE(NodeRecordsMentioning(iqn, wrong).empty());
  EXPECT_EQ(host_->log().find(wrong), std::string::npos);
  // The right secret works afterwards: nothing of the failed attempt is in the way.
  s = Connect(portal, iqn, v1alpha2::ONE_WAY_CHAP, options.chap_username, options.chap_secret);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(WaitForTargetDisks(portal, iqn).size(), 1u);
  EXPECT_TRUE(Disconnect(portal, iqn).ok());
}

// As documented (plugins/iscsi/README.md): portals are the proxy's state and survive a restart; sessions are
// the kernel's, so a restarted proxy still sees the session's disk and can disconnect it.
TEST_F(IscsiStaging, PortalsAndSessionsOutliveAProxyRestart) {
  auto target = StartTarget(TgtTargetOptions{});
  ASSERT_NE(target, nullptr);
  const auto portal = Portal(*target);
  const std::string iqn = target->iqns()[0];
  ASSERT_TRUE(AddPortal(portal).ok());
  ASSERT_TRUE(Connect(portal, iqn, v1alpha2::NONE, "", "").ok()) << host_->log();
  const auto disks = WaitForTargetDisks(portal, iqn);
  ASSERT_EQ(disks.size(), 1u);
  ASSERT_EQ(host_->Stop(), 0);

  StartHost();
  v1alpha2::ListTargetPortalsResponse listed;
  ASSERT_TRUE(Call(channel_, "/v1alpha2.Iscsi/ListTargetPortals", v1alpha2::ListTargetPortalsRequest(), &listed).ok());
  ASSERT_EQ(listed.target_portals_size(), 1);
  EXPECT_EQ(listed.target_portals(0).target_port(), target->port());
  EXPECT_EQ(TargetDisks(portal, iqn), disks);
  EXPECT_TRUE(Connect(portal, iqn, v1alpha2::NONE, "", "").ok()) << "connecting a connected target is success";
  EXPECT_TRUE(Disconnect(portal, iqn).ok());
  EXPECT_TRUE(TargetDisks(portal, iqn).empty());
}

}  // namespace
}  // namespace csi_proxy::testing

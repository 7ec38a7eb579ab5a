// End to end: the real csi-proxy host with the real disk group library, called over its real Unix socket with
// upstream's wire messages, on real loop devices.
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <fstream>

#include "block_device_scan_linux.h"
#include "block_probe_linux.h"
#include "grpc_client.h"
#include "host_process.h"
#include "loop_device.h"
#include "run_program.h"
#include "v1/disk.pb.h"
#include "v1alpha1/disk.pb.h"
#include "v1beta1/disk.pb.h"
#include "v1beta2/disk.pb.h"
#include "v1beta3/disk.pb.h"

namespace csi_proxy::disk {
namespace {

using csi_proxy::testing::Call;
using csi_proxy::testing::Dial;
using csi_proxy::testing::HostProcess;
using csi_proxy::testing::LoopDevice;
using csi_proxy::testing::TempDir;
using Code = grpc::StatusCode;

constexpr const char* kEndpoint = "csi-proxy-disk-v1";
constexpr uint64_t kMiB = 1 << 20;

std::string Method(const std::string& name) { return "/v1.Disk/" + name; }

class DiskEndToEnd : public ::testing::Test {
 protected:
  explicit DiskEndToEnd(std::string group_keys = "")
      : host_("[groups.disk]\nrequired = true\n" + group_keys, "kubelet_path = \"" + dir_.MakeDir("kubelet") + "\"\n") {
  }

  void SetUp() override {
    CSI_PROXY_SKIP_WITHOUT_LOOP_DEVICES();
    ASSERT_TRUE(host_.Start({kEndpoint})) << host_.error() << "\n" << host_.log();
    channel_ = Dial(host_.endpoint(kEndpoint));
  }

  grpc::Status PartitionDisk(uint32_t number) {
    v1::PartitionDiskRequest req;
    req.set_disk_number(number);
    v1::PartitionDiskResponse resp;
    return Call(channel_, Method("PartitionDisk"), req, &resp);
  }

  grpc::Status GetDiskStats(uint32_t number, int64_t* size) {
    v1::GetDiskStatsRequest req;
    req.set_disk_number(number);
    v1::GetDiskStatsResponse resp;
    auto status = Call(channel_, Method("GetDiskStats"), req, &resp);
    *size = resp.total_bytes();
    return status;
  }

  grpc::Status SetDiskState(uint32_t number, bool online) {
    v1::SetDiskStateRequest req;
    req.set_disk_number(number);
    req.set_is_online(online);
    v1::SetDiskStateResponse resp;
    return Call(channel_, Method("SetDiskState"), req, &resp);
  }

  grpc::Status GetDiskState(uint32_t number, bool* online) {
    v1::GetDiskStateRequest req;
    req.set_disk_number(number);
    v1::GetDiskStateResponse resp;
    auto status = Call(channel_, Method("GetDiskState"), req, &resp);
    *online = resp.is_online();
    return status;
  }

  grpc::Status Rescan() {
    v1::RescanRequest req;
    v1::RescanResponse resp;
    return Call(channel_, Method("Rescan"), req, &resp);
  }

  size_t KernelPartitionCount(const LoopDevice& loop) {
    common::BlockDevices devices;
    auto disk = devices.DiskByName(loop.name());
    return disk.ok() ? devices.PartitionsOf(*disk)->size() : 0;
  }

  TempDir dir_;  // declared first: gone last, after the host stopped; unmounts whatever a test left
  HostProcess host_;
  std::shared_ptr<grpc::Channel> channel_;
};

// Upstream's disk test: stats of a fresh disk, Rescan, then partitioning a raw disk, and again.
TEST_F(DiskEndToEnd, StatsRescanAndPartitioningARawDiskTwice) {
  LoopDevice loop(256 * kMiB);
  int64_t size = 0;
  auto status = GetDiskStats(loop.DiskNumber(), &size);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(size, static_cast<int64_t>(256 * kMiB));
  ASSERT_TRUE(Rescan().ok());

  status = PartitionDisk(loop.DiskNumber());
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(KernelPartitionCount(loop), 1u);
  EXPECT_EQ(common::ProbeSignatures(loop.path())->pt_type, "gpt");
  const std::string table = loop.ReadAt(0, 34 * 512);
  status = PartitionDisk(loop.DiskNumber());
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(loop.ReadAt(0, 34 * 512), table);
}

TEST_F(DiskEndToEnd, ListDiskIDsHasEveryDiskAndLocationsOnlyScsiOnes) {
  LoopDevice loop(64 * kMiB);
  v1::ListDiskIDsRequest ids_req;
  v1::ListDiskIDsResponse ids;
  ASSERT_TRUE(Call(channel_, Method("ListDiskIDs"), ids_req, &ids).ok());
  ASSERT_EQ(ids.diskids().count(loop.DiskNumber()), 1u);
  EXPECT_EQ(ids.diskids().at(loop.DiskNumber()).page83(), "");

  v1::ListDiskLocationsRequest loc_req;
  v1::ListDiskLocationsResponse locations;
  ASSERT_TRUE(Call(channel_, Method("ListDiskLocations"), loc_req, &locations).ok());
  EXPECT_EQ(locations.disk_locations().count(loop.DiskNumber()), 0u) << "a loop device has no SCSI address";
}

// Issue 22: GCE PD, EBS and vSphere end every unstage with SetDiskState(offline), also on disks without a kernel
// offline state (NVMe, virtio, loop). The host keeps their state, across a restart of the proxy too.
TEST_F(DiskEndToEnd, ALoopDiskGoesOfflineAndStaysOfflineAcrossAProxyRestart) {
  LoopDevice loop(64 * kMiB);
  bool online = false;
  ASSERT_TRUE(GetDiskState(loop.DiskNumber(), &online).ok());
  EXPECT_TRUE(online);
  EXPECT_TRUE(SetDiskState(loop.DiskNumber(), true).ok());
  auto status = SetDiskState(loop.DiskNumber(), false);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_TRUE(GetDiskState(loop.DiskNumber(), &online).ok());
  EXPECT_FALSE(online);
  status = PartitionDisk(loop.DiskNumber());
  EXPECT_EQ(status.error_code(), Code::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find("offline"), std::string::npos) << status.error_message();

  ASSERT_EQ(host_.Stop(), 0) << host_.log();
  ASSERT_TRUE(host_.Start({kEndpoint})) << host_.error() << "\n" << host_.log();
  channel_ = Dial(host_.endpoint(kEndpoint));
  ASSERT_TRUE(GetDiskState(loop.DiskNumber(), &online).ok());
  EXPECT_FALSE(online) << "the offline state survives a restart of the proxy";

  ASSERT_TRUE(SetDiskState(loop.DiskNumber(), true).ok());
  ASSERT_TRUE(GetDiskState(loop.DiskNumber(), &online).ok());
  EXPECT_TRUE(online);
  status = PartitionDisk(loop.DiskNumber());
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST_F(DiskEndToEnd, UnknownDisksAreNotFound) {
  int64_t size = 0;
  EXPECT_EQ(GetDiskStats(0, &size).error_code(), Code::NOT_FOUND);
  EXPECT_EQ(PartitionDisk(UINT32_MAX).error_code(), Code::NOT_FOUND);
  bool online = false;
  EXPECT_EQ(GetDiskState(UINT32_MAX, &online).error_code(), Code::NOT_FOUND);
}

TEST_F(DiskEndToEnd, PartitionDiskRefusesAMountedDiskAndItsDataSurvives) {
  LoopDevice loop(64 * kMiB);
  auto mkfs = testing::SystemProgram("mkfs.ext4");
  if (mkfs.empty()) GTEST_SKIP() << "needs mkfs.ext4";
  ASSERT_TRUE(common::RunProgramChecked({mkfs, "-q", "-F", loop.path()}).ok());
  const std::string mnt = dir_.MakeDir("mnt");
  ASSERT_EQ(mount(loop.path().c_str(), mnt.c_str(), "ext4", 0, nullptr), 0);
  std::ofstream(mnt + "/precious.txt") << "keep me";
  auto status = PartitionDisk(loop.DiskNumber());
  EXPECT_EQ(status.error_code(), Code::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find("mounted at " + mnt), std::string::npos) << status.error_message();
  std::string content;
  std::getline(std::ifstream(mnt + "/precious.txt"), content);
  EXPECT_EQ(content, "keep me");
  ASSERT_EQ(umount(mnt.c_str()), 0);
  EXPECT_EQ(common::ProbeSignatures(loop.path())->fs_type, "ext4");
}

// Older clients: the same disks, named by decimal strings (v1alpha1 to v1beta2) or numbers (v1beta3).
class OlderDiskVersions : public DiskEndToEnd {
 protected:
  void SetUp() override {
    CSI_PROXY_SKIP_WITHOUT_LOOP_DEVICES();
    ASSERT_TRUE(host_.Start({kEndpoint, "csi-proxy-disk-v1beta3", "csi-proxy-disk-v1beta2", "csi-proxy-disk-v1beta1",
                             "csi-proxy-disk-v1alpha1"}))
        << host_.error();
  }
  std::shared_ptr<grpc::Channel> Channel(const std::string& version) {
    return Dial(host_.endpoint("csi-proxy-disk-" + version));
  }
};

TEST_F(OlderDiskVersions, ServeTheSameDisksUnderTheirOldNames) {
  LoopDevice loop(64 * kMiB);
  const std::string id = std::to_string(loop.DiskNumber());

  v1alpha1::PartitionDiskRequest partition;
  partition.set_diskid(id);
  v1alpha1::PartitionDiskResponse partitioned;
  auto status = Call(Channel("v1alpha1"), "/v1alpha1.Disk/PartitionDisk", partition, &partitioned);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(KernelPartitionCount(loop), 1u);
  partition.set_diskid("-1");
  EXPECT_EQ(Call(Channel("v1alpha1"), "/v1alpha1.Disk/PartitionDisk", partition, &partitioned).error_code(),
            Code::INVALID_ARGUMENT);
  v1alpha1::GetDiskNumberByNameRequest by_name;
  by_name.set_disk_name("no-such-page83");
  v1alpha1::GetDiskNumberByNameResponse number;
  EXPECT_EQ(Call(Channel("v1alpha1"), "/v1alpha1.Disk/GetDiskNumberByName", by_name, &number).error_code(),
            Code::NOT_FOUND);

  v1beta1::DiskStatsRequest stats;
  stats.set_diskid(id);
  v1beta1::DiskStatsResponse size;
  ASSERT_TRUE(Call(Channel("v1beta1"), "/v1beta1.Disk/DiskStats", stats, &size).ok());
  EXPECT_EQ(size.disksize(), static_cast<int64_t>(64 * kMiB));
  v1beta1::ListDiskIDsRequest ids_req;
  v1beta1::ListDiskIDsResponse ids;
  ASSERT_TRUE(Call(Channel("v1beta1"), "/v1beta1.Disk/ListDiskIDs", ids_req, &ids).ok());
  ASSERT_EQ(ids.diskids().count(id), 1u);
  EXPECT_EQ(ids.diskids().at(id).identifiers().count("page83"), 1u);
  EXPECT_EQ(ids.diskids().at(id).identifiers().count("serialNumber"), 1u);

  v1beta2::GetAttachStateRequest get;
  get.set_diskid(id);
  v1beta2::GetAttachStateResponse state;
  ASSERT_TRUE(Call(Channel("v1beta2"), "/v1beta2.Disk/GetAttachState", get, &state).ok());
  EXPECT_TRUE(state.isonline());
  v1beta2::SetAttachStateRequest set;
  set.set_diskid(id);
  set.set_isonline(false);
  v1beta2::SetAttachStateResponse set_resp;
  status = Call(Channel("v1beta2"), "/v1beta2.Disk/SetAttachState", set, &set_resp);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_TRUE(Call(Channel("v1beta2"), "/v1beta2.Disk/GetAttachState", get, &state).ok());
  EXPECT_FALSE(state.isonline());
  set.set_isonline(true);
  ASSERT_TRUE(Call(Channel("v1beta2"), "/v1beta2.Disk/SetAttachState", set, &set_resp).ok());

  v1beta3::GetDiskStatsRequest v1beta3_stats;
  v1beta3_stats.set_disk_number(loop.DiskNumber());
  v1beta3::GetDiskStatsResponse v1beta3_size;
  ASSERT_TRUE(Call(Channel("v1beta3"), "/v1beta3.Disk/GetDiskStats", v1beta3_stats, &v1beta3_size).ok());
  EXPECT_EQ(v1beta3_size.total_bytes(), static_cast<int64_t>(64 * kMiB));
}

class DiskEndToEndWithLinuxPartitionType : public DiskEndToEnd {
 protected:
  DiskEndToEndWithLinuxPartitionType() : DiskEndToEnd("partition_type = \"0FC63DAF-8483-4772-8E79-3D69D8477DE4\"\n") {}
};

TEST_F(DiskEndToEndWithLinuxPartitionType, NewPartitionsGetTheConfiguredType) {
  LoopDevice loop(64 * kMiB);
  ASSERT_TRUE(PartitionDisk(loop.DiskNumber()).ok());
  auto entries = common::ReadPartitionEntries(loop.path());
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 1u);
  EXPECT_EQ(entries->front().type, "0fc63daf-8483-4772-8e79-3d69d8477de4");
}

TEST(DiskGroupConfiguration, AnUnknownKeyOrABadPartitionTypeRefusesTheGroup) {
  HostProcess unknown("[groups.disk]\nrequired = true\npartition_typ = \"x\"\n");
  EXPECT_FALSE(unknown.Start({kEndpoint}, std::chrono::seconds(10)));
  EXPECT_NE(unknown.log().find("partition_typ"), std::string::npos) << unknown.log();
  HostProcess bad("[groups.disk]\nrequired = true\npartition_type = \"linux\"\n");
  EXPECT_FALSE(bad.Start({kEndpoint}, std::chrono::seconds(10)));
  EXPECT_NE(bad.log().find("GPT type GUID"), std::string::npos) << bad.log();
}

}  // namespace
}  // namespace csi_proxy::disk

// End to end: the real csi-proxy host with the real disk and volume group libraries, called over their real Unix
// sockets with upstream's wire messages, on real loop devices: upstream's volume sequence (v1 and v2alpha1),
// its negative cases, the refusals that keep data safe, and several disks staged at once.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>
#include <vector>

#include "block_device_scan_linux.h"
#include "block_probe_linux.h"
#include "grpc_client.h"
#include "host_process.h"
#include "loop_device.h"
#include "v1/disk.pb.h"
#include "v1/volume.pb.h"
#include "v1alpha1/volume.pb.h"
#include "v1beta1/volume.pb.h"
#include "v1beta2/volume.pb.h"
#include "v1beta3/volume.pb.h"
#include "v2alpha1/volume.pb.h"

namespace csi_proxy::volume {
namespace {

using csi_proxy::testing::Call;
using csi_proxy::testing::Dial;
using csi_proxy::testing::HostProcess;
using csi_proxy::testing::LoopDevice;
using csi_proxy::testing::TempDir;
using Code = grpc::StatusCode;

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kGiB = 1 << 30;
constexpr const char* kDiskV1 = "csi-proxy-disk-v1";
constexpr const char* kVolumeV1 = "csi-proxy-volume-v1";
constexpr const char* kVolumeV2alpha1 = "csi-proxy-volume-v2alpha1";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A client of one volume API version; v1 and v2alpha1 share every message shape, so it is written once.
#define CSI_PROXY_VOLUME_CLIENT(ns, service)                                                       \
  struct ns##Client {                                                                              \
    std::shared_ptr<grpc::Channel> channel;                                                        \
    static std::string M(const char* name) { return std::string("/" #ns "." service "/") + name; } \
    grpc::Status List(uint32_t disk, std::vector<std::string>* ids, uint32_t partition = 0) {      \
      ns::ListVolumesOnDiskRequest req;                                                            \
      req.set_disk_number(disk);                                                                   \
      req.set_partition_number(partition);                                                         \
      ns::ListVolumesOnDiskResponse resp;                                                          \
      auto s = Call(channel, M("ListVolumesOnDisk"), req, &resp);                                  \
      ids->assign(resp.volume_ids().begin(), resp.volume_ids().end());                             \
      return s;                                                                                    \
    }                                                                                              \
    grpc::Status Mount(const std::string& id, const std::string& target) {                         \
      ns::MountVolumeRequest req;                                                                  \
      req.set_volume_id(id);                                                                       \
      req.set_target_path(target);                                                                 \
      ns::MountVolumeResponse resp;                                                                \
      return Call(channel, M("MountVolume"), req, &resp);                                          \
    }                                                                                              \
    grpc::Status Unmount(const std::string& id, const std::string& target) {                       \
      ns::UnmountVolumeRequest req;                                                                \
      req.set_volume_id(id);                                                                       \
      req.set_target_path(target);                                                                 \
      ns::UnmountVolumeResponse resp;                                                              \
      return Call(channel, M("UnmountVolume"), req, &resp);                                        \
    }                                                                                              \
    grpc::Status IsFormatted(const std::string& id, bool* formatted) {                             \
      ns::IsVolumeFormattedRequest req;                                                            \
      req.set_volume_id(id);                                                                       \
      ns::IsVolumeFormattedResponse resp;                                                          \
      auto s = Call(channel, M("IsVolumeFormatted"), req, &resp);                                  \
      *formatted = resp.formatted();                                                               \
      return s;                                                                                    \
    }                                                                                              \
    grpc::Status Format(const std::string& id) {                                                   \
      ns::FormatVolumeRequest req;                                                                 \
      req.set_volume_id(id);                                                                       \
      ns::FormatVolumeResponse resp;                                                               \
      return Call(channel, M("FormatVolume"), req, &resp, std::chrono::minutes(5));                \
    }                                                                                              \
    grpc::Status Resize(const std::string& id, int64_t size) {                                     \
      ns::ResizeVolumeRequest req;                                                                 \
      req.set_volume_id(id);                                                                       \
      req.set_size_bytes(size);                                                                    \
      ns::ResizeVolumeResponse resp;                                                               \
      return Call(channel, M("ResizeVolume"), req, &resp, std::chrono::minutes(5));                \
    }                                                                                              \
    grpc::Status Stats(const std::string& id, int64_t* total, int64_t* used) {                     \
      ns::GetVolumeStatsRequest req;                                                               \
      req.set_volume_id(id);                                                                       \
      ns::GetVolumeStatsResponse resp;                                                             \
      auto s = Call(channel, M("GetVolumeStats"), req, &resp);                                     \
      *total = resp.total_bytes();                                                                 \
      *used = resp.used_bytes();                                                                   \
      return s;                                                                                    \
    }                                                                                              \
    grpc::Status DiskNumber(const std::string& id, uint32_t* number) {                             \
      ns::GetDiskNumberFromVolumeIDRequest req;                                                    \
      req.set_volume_id(id);                                                                       \
      ns::GetDiskNumberFromVolumeIDResponse resp;                                                  \
      auto s = Call(channel, M("GetDiskNumberFromVolumeID"), req, &resp);                          \
      *number = resp.disk_number();                                                                \
      return s;                                                                                    \
    }                                                                                              \
    grpc::Status IdFromTarget(const std::string& target, std::string* id) {                        \
      ns::GetVolumeIDFromTargetPathRequest req;                                                    \
      req.set_target_path(target);                                                                 \
      ns::GetVolumeIDFromTargetPathResponse resp;                                                  \
      auto s = Call(channel, M("GetVolumeIDFromTargetPath"), req, &resp);                          \
      *id = resp.volume_id();                                                                      \
      return s;                                                                                    \
    }                                                                                              \
    grpc::Status WriteCache(const std::string& id) {                                               \
      ns::WriteVolumeCacheRequest req;                                                             \
      req.set_volume_id(id);                                                                       \
      ns::WriteVolumeCacheResponse resp;                                                           \
      return Call(channel, M("WriteVolumeCache"), req, &resp);                                     \
    }                                                                                              \
  };
CSI_PROXY_VOLUME_CLIENT(v1, "Volume")
CSI_PROXY_VOLUME_CLIENT(v2alpha1, "Volume")
CSI_PROXY_VOLUME_CLIENT(v1beta3, "Volume")
#undef CSI_PROXY_VOLUME_CLIENT

class VolumeEndToEnd : public ::testing::Test {
 protected:
  explicit VolumeEndToEnd(const std::string& fs_type = "ext4")
      : kubelet_(dir_.MakeDir("kubelet")),
        host_(
            "[groups.disk]\nrequired = true\n[groups.volume]\nrequired = true\ndefault_fs_type = \"" + fs_type + "\"\n",
            "kubelet_path = \"" + kubelet_ + "\"\n") {}

  void SetUp() override {
    CSI_PROXY_SKIP_WITHOUT_LOOP_DEVICES();
    if (testing::SystemProgram("mkfs.ext4").empty()) GTEST_SKIP() << "needs mkfs.ext4";
    ASSERT_TRUE(host_.Start({kDiskV1, kVolumeV1, kVolumeV2alpha1})) << host_.error() << "\n" << host_.log();
    disk_ = Dial(host_.endpoint(kDiskV1));
    v1_.channel = Dial(host_.endpoint(kVolumeV1));
    v2_.channel = Dial(host_.endpoint(kVolumeV2alpha1));
  }

  grpc::Status PartitionDisk(uint32_t number) {
    v1::PartitionDiskRequest req;
    req.set_disk_number(number);
    v1::PartitionDiskResponse resp;
    return Call(disk_, "/v1.Disk/PartitionDisk", req, &resp);
  }
  grpc::Status Rescan() {
    v1::RescanRequest req;
    v1::RescanResponse resp;
    return Call(disk_, "/v1.Disk/Rescan", req, &resp);
  }
  int64_t DiskSize(uint32_t number) {
    v1::GetDiskStatsRequest req;
    req.set_disk_number(number);
    v1::GetDiskStatsResponse resp;
    EXPECT_TRUE(Call(disk_, "/v1.Disk/GetDiskStats", req, &resp).ok());
    return resp.total_bytes();
  }
  grpc::Status Closest(const std::string& target, std::string* id) {
    v2alpha1::GetClosestVolumeIDFromTargetPathRequest req;
    req.set_target_path(target);
    v2alpha1::GetClosestVolumeIDFromTargetPathResponse resp;
    auto s = Call(v2_.channel, "/v2alpha1.Volume/GetClosestVolumeIDFromTargetPath", req, &resp);
    *id = resp.volume_id();
    return s;
  }

  static uint64_t PartitionSize(const std::string& id) {
    auto device = common::BlockDevices().ResolveVolumeId(id);
    return device.ok() ? device->size_bytes : 0;
  }
  // Filesystem metadata takes more than upstream's 20 MiB on a gigabyte; within 10% below the partition size.
  static void ExpectSizeAround(int64_t actual, uint64_t expected) {
    EXPECT_LE(actual, static_cast<int64_t>(expected));
    EXPECT_GE(actual, static_cast<int64_t>(expected * 9 / 10)) << "expected about " << expected;
  }

  template <typename Client>
  void RunUpstreamSequence(Client& client, const std::string& fs_type, const std::string& name);

  TempDir dir_;  // declared first: gone last, after the host stopped; unmounts whatever a test left
  std::string kubelet_;
  HostProcess host_;
  std::shared_ptr<grpc::Channel> disk_;
  v1Client v1_;
  v2alpha1Client v2_;
};

// Upstream's volume test: diskInit (partitioned disk), list, format, stats, grow and expand, disk number,
// mount, use, look up by target path, unmount. With v2alpha1 also GetClosestVolumeIDFromTargetPath.
template <typename Client>
void VolumeEndToEnd::RunUpstreamSequence(Client& client, const std::string& fs_type, const std::string& name) {
  LoopDevice loop(1 * kGiB);
  ASSERT_TRUE(PartitionDisk(loop.DiskNumber()).ok());

  std::vector<std::string> ids;
  auto status = client.List(loop.DiskNumber(), &ids);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(ids.size(), 1u);
  const std::string id = ids.front();
  EXPECT_EQ(id, loop.PartitionPath(1));

  bool formatted = true;
  ASSERT_TRUE(client.IsFormatted(id, &formatted).ok());
  EXPECT_FALSE(formatted);
  status = client.Format(id);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_TRUE(client.IsFormatted(id, &formatted).ok());
  EXPECT_TRUE(formatted);
  EXPECT_EQ(common::ProbeSignatures(id)->fs_type, fs_type);

  int64_t total = 0, used = 0;
  status = client.Stats(id, &total, &used);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ExpectSizeAround(total, PartitionSize(id));
  const int64_t first_total = total;

  loop.Grow(2 * kGiB);
  ASSERT_TRUE(Rescan().ok());
  status = client.Resize(id, 0);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_TRUE(client.Stats(id, &total, &used).ok());
  ExpectSizeAround(total, PartitionSize(id));
  EXPECT_GT(total, first_total);
  EXPECT_GE(PartitionSize(id), 2 * kGiB - 2 * kMiB);

  uint32_t number = 0;
  ASSERT_TRUE(client.DiskNumber(id, &number).ok());
  EXPECT_EQ(number, loop.DiskNumber());
  EXPECT_EQ(DiskSize(number), static_cast<int64_t>(2 * kGiB));

  const std::string mnt = dir_.MakeDir("kubelet/plugins/testplugin.csi.io/" + name + "/mount");
  std::string closest;
  if constexpr (std::is_same_v<Client, v2alpha1Client>) {
    // Not mounted yet: the volume holding the directory (the one holding the kubelet path).
    struct stat st {};
    ASSERT_EQ(stat(mnt.c_str(), &st), 0);
    auto holder = common::BlockDevices().DeviceByDevno(st.st_dev);
    if (holder.ok()) {
      ASSERT_TRUE(Closest(mnt, &closest).ok());
      EXPECT_EQ(closest, holder->path);
    }
  }
  status = client.Mount(id, mnt);
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::ofstream(mnt + "/hello.txt") << "hello " << name;
  EXPECT_EQ(ReadFile(mnt + "/hello.txt"), "hello " + name);
  EXPECT_TRUE(client.WriteCache(id).ok());

  std::string by_target;
  status = client.IdFromTarget(mnt, &by_target);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(by_target, id);
  if constexpr (std::is_same_v<Client, v2alpha1Client>) {
    std::filesystem::create_directories(mnt + "/foo/bar");
    status = Closest(mnt + "/foo/bar", &closest);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(closest, id);
    const std::string link = kubelet_ + "/" + name + "-link";
    std::filesystem::create_directory_symlink(mnt, link);
    status = Closest(link, &closest);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(closest, id);
  }

  status = client.Unmount(id, mnt);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_FALSE(std::filesystem::exists(mnt + "/hello.txt"));
  EXPECT_EQ(client.IdFromTarget(mnt, &by_target).error_code(), Code::NOT_FOUND);
}

TEST_F(VolumeEndToEnd, UpstreamSequenceV1) { RunUpstreamSequence(v1_, "ext4", "v1"); }

TEST_F(VolumeEndToEnd, UpstreamSequenceV2alpha1) { RunUpstreamSequence(v2_, "ext4", "v2alpha1"); }

// Issue 13, through the real socket: volumes are mounted nosuid,nodev, and the node's own filesystems are refused.
TEST_F(VolumeEndToEnd, MountedVolumesAreNosuidNodevAndAVolumeMountedOutsideTheRootsIsRefused) {
  LoopDevice loop(128 * kMiB);
  ASSERT_TRUE(PartitionDisk(loop.DiskNumber()).ok());
  const std::string id = loop.PartitionPath(1);
  ASSERT_TRUE(v1_.Format(id).ok());
  const std::string mnt = dir_.MakeDir("kubelet/stage");
  ASSERT_TRUE(v1_.Mount(id, mnt).ok());
  struct statvfs vfs {};
  ASSERT_EQ(statvfs(mnt.c_str(), &vfs), 0);
  EXPECT_TRUE(vfs.f_flag & ST_NOSUID);
  EXPECT_TRUE(vfs.f_flag & ST_NODEV);

  LoopDevice other(128 * kMiB);
  ASSERT_TRUE(PartitionDisk(other.DiskNumber()).ok());
  const std::string node_fs = other.PartitionPath(1);
  ASSERT_TRUE(v1_.Format(node_fs).ok());
  const std::string outside = dir_.MakeDir("node-filesystem");  // TempDir unmounts what is beneath it
  ASSERT_EQ(mount(node_fs.c_str(), outside.c_str(), "ext4", 0, nullptr), 0);
  auto status = v1_.Mount(node_fs, dir_.MakeDir("kubelet/pod"));
  EXPECT_EQ(status.error_code(), Code::FAILED_PRECONDITION) << status.error_message();
  EXPECT_NE(status.error_message().find("outside the allowed roots"), std::string::npos) << status.error_message();
}

class XfsVolumeEndToEnd : public VolumeEndToEnd {
 protected:
  XfsVolumeEndToEnd() : VolumeEndToEnd("xfs") {}
  void SetUp() override {
    if (testing::SystemProgram("mkfs.xfs").empty()) GTEST_SKIP() << "needs xfsprogs";
    VolumeEndToEnd::SetUp();
  }
};

TEST_F(XfsVolumeEndToEnd, UpstreamSequenceV1FormatsXfsWhenConfigured) { RunUpstreamSequence(v1_, "xfs", "xfs"); }

// Upstream's negative test: each call with an empty or "-1" volume ID fails.
TEST_F(VolumeEndToEnd, UpstreamNegativeCases) {
  for (const std::string id : {"", "-1"}) {
    SCOPED_TRACE("volume id '" + id + "'");
    bool formatted = false;
    int64_t total = 0, used = 0;
    EXPECT_EQ(v1_.IsFormatted(id, &formatted).error_code(), Code::INVALID_ARGUMENT);
    EXPECT_EQ(v1_.Format(id).error_code(), Code::INVALID_ARGUMENT);
    EXPECT_EQ(v1_.Resize(id, 2 * kMiB).error_code(), Code::INVALID_ARGUMENT);
    EXPECT_EQ(v1_.Mount(id, "").error_code(), Code::INVALID_ARGUMENT);
    EXPECT_EQ(v1_.Unmount(id, "").error_code(), Code::INVALID_ARGUMENT);
    EXPECT_EQ(v1_.Stats(id, &total, &used).error_code(), Code::INVALID_ARGUMENT);
  }
}

// Issue 22: FormatVolume's own fields (fs_type = 2, format_options = 3), appended to v1's and v2alpha1's request,
// reach mkfs; a refused option is named in the answer.
TEST_F(VolumeEndToEnd, FormatOptionsTravelInTheFieldsAppendedToV1AndV2alpha1) {
  LoopDevice first(128 * kMiB), second(128 * kMiB);
  ASSERT_TRUE(PartitionDisk(first.DiskNumber()).ok());
  ASSERT_TRUE(PartitionDisk(second.DiskNumber()).ok());

  v1::FormatVolumeRequest v1_req;
  v1_req.set_volume_id(first.PartitionPath(1));
  v1_req.set_fs_type("ext4");
  for (const char* item : {"-L", "from-v1", "-i", "65536"}) v1_req.add_format_options(item);
  v1::FormatVolumeResponse v1_resp;
  auto status = Call(v1_.channel, "/v1.Volume/FormatVolume", v1_req, &v1_resp, std::chrono::minutes(5));
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(common::ProbeSignatures(first.PartitionPath(1))->label, "from-v1");

  v2alpha1::FormatVolumeRequest v2_req;
  v2_req.set_volume_id(second.PartitionPath(1));
  for (const char* item : {"-d", "/etc"}) v2_req.add_format_options(item);
  v2alpha1::FormatVolumeResponse v2_resp;
  status = Call(v2_.channel, "/v2alpha1.Volume/FormatVolume", v2_req, &v2_resp);
  EXPECT_EQ(status.error_code(), Code::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("mkfs option \"-d\" is not allowed"), std::string::npos)
      << status.error_message();
  EXPECT_TRUE(common::ProbeSignatures(second.PartitionPath(1))->fs_type.empty());
}

// Issue 22: azuredisk ends every stage with ResizeVolume{volume_id: "<disk number>"}; every version that has
// ResizeVolume takes the number of a disk with one volume.
TEST_F(VolumeEndToEnd, EveryVersionResizesTheOneVolumeOfADiskNamedByItsNumber) {
  LoopDevice loop(128 * kMiB);
  ASSERT_TRUE(PartitionDisk(loop.DiskNumber()).ok());
  const std::string id = loop.PartitionPath(1);
  ASSERT_TRUE(v1_.Format(id).ok());
  const std::string number = std::to_string(loop.DiskNumber());
  uint64_t size = 128 * kMiB;
  auto grow = [&] {
    size += 64 * kMiB;
    loop.Grow(size);
    ASSERT_TRUE(Rescan().ok());
  };
#define CSI_PROXY_RESIZE_BY_NUMBER(ns, size_field)                                                                \
  {                                                                                                               \
    SCOPED_TRACE(#ns);                                                                                            \
    grow();                                                                                                       \
    ns::ResizeVolumeRequest req;                                                                                  \
    req.set_volume_id(number);                                                                                    \
    req.set_##size_field(0);                                                                                      \
    ns::ResizeVolumeResponse resp;                                                                                \
    auto status = Call(Dial(host_.endpoint("csi-proxy-volume-" #ns)), "/" #ns ".Volume/ResizeVolume", req, &resp, \
                       std::chrono::minutes(5));                                                                  \
    ASSERT_TRUE(status.ok()) << status.error_message();                                                           \
    EXPECT_GE(PartitionSize(id), size - 2 * kMiB);                                                                \
  }
  CSI_PROXY_RESIZE_BY_NUMBER(v1, size_bytes)
  CSI_PROXY_RESIZE_BY_NUMBER(v2alpha1, size_bytes)
  CSI_PROXY_RESIZE_BY_NUMBER(v1beta3, size_bytes)
  CSI_PROXY_RESIZE_BY_NUMBER(v1beta2, size)
  CSI_PROXY_RESIZE_BY_NUMBER(v1beta1, size)
  CSI_PROXY_RESIZE_BY_NUMBER(v1alpha1, size)
#undef CSI_PROXY_RESIZE_BY_NUMBER
}

TEST_F(VolumeEndToEnd, FormatVolumeOfARegularFileIsRefusedAndTheFileIsUntouched) {
  const std::string file = dir_.Sub("passwd-copy");
  std::filesystem::copy_file("/etc/passwd", file);
  const std::string before = ReadFile("/etc/passwd");
  EXPECT_EQ(v1_.Format("/etc/passwd").error_code(), Code::INVALID_ARGUMENT);
  EXPECT_EQ(v1_.Format(file).error_code(), Code::INVALID_ARGUMENT);
  EXPECT_EQ(ReadFile("/etc/passwd"), before);
  EXPECT_EQ(ReadFile(file), before);
}

TEST_F(VolumeEndToEnd, RefusalsKeepData) {
  LoopDevice loop(256 * kMiB);
  ASSERT_TRUE(PartitionDisk(loop.DiskNumber()).ok());
  const std::string id = loop.PartitionPath(1);
  ASSERT_TRUE(v1_.Format(id).ok());
  const std::string mnt = dir_.MakeDir("kubelet/stage");
  ASSERT_TRUE(v1_.Mount(id, mnt).ok());
  std::ofstream(mnt + "/precious.txt") << "keep me";

  {
    // Mounted where MountVolume mounted it, but busy (a pod has a file open): never unmounted, so not formatted.
    std::ifstream in_use(mnt + "/precious.txt");
    auto status = v1_.Format(id);
    EXPECT_EQ(status.error_code(), Code::FAILED_PRECONDITION);
    EXPECT_NE(status.error_message().find("is in use at"), std::string::npos) << status.error_message();
  }
  {
    // Mounted somewhere else too (a bind mount the volume group did not make): not the group's to unmount.
    const std::string bound = dir_.MakeDir("kubelet/bound");
    ASSERT_EQ(mount(mnt.c_str(), bound.c_str(), nullptr, MS_BIND, nullptr), 0) << strerror(errno);
    auto status = v1_.Format(id);
    EXPECT_EQ(status.error_code(), Code::FAILED_PRECONDITION);
    EXPECT_NE(status.error_message().find("is mounted at " + bound + ", not a mount point MountVolume made"),
              std::string::npos)
        << status.error_message();
    ASSERT_EQ(umount2(bound.c_str(), 0), 0) << strerror(errno);
  }
  EXPECT_EQ(v1_.Mount(id, kubelet_ + "/../escape").error_code(), Code::INVALID_ARGUMENT);
  EXPECT_EQ(v1_.Mount(id, "/etc").error_code(), Code::PERMISSION_DENIED);
  EXPECT_EQ(v1_.Resize(id, 64 * kMiB).error_code(), Code::FAILED_PRECONDITION) << "smaller than now: never shrinks";
  EXPECT_EQ(v1_.Resize(id, -5).error_code(), Code::INVALID_ARGUMENT);
  EXPECT_TRUE(PartitionDisk(loop.DiskNumber()).ok()) << "already partitioned: nothing to do";
  EXPECT_EQ(ReadFile(mnt + "/precious.txt"), "keep me");

  ASSERT_TRUE(v1_.Mount(id, mnt).ok()) << "mounting the same volume again";
  ASSERT_TRUE(v1_.Unmount(id, mnt).ok());
  EXPECT_TRUE(v1_.Unmount(id, mnt).ok()) << "unmounting what is not mounted";
  ASSERT_TRUE(v1_.Mount(id, mnt).ok());
  EXPECT_EQ(ReadFile(mnt + "/precious.txt"), "keep me");
  ASSERT_TRUE(v1_.Unmount(id, mnt).ok());
}

// Several CSI NodeStage sequences at once, each on its own disk, through the sockets.
TEST_F(VolumeEndToEnd, SeveralDisksAreStagedInParallel) {
  constexpr int kDisks = 4;
  std::vector<std::unique_ptr<LoopDevice>> loops;
  for (int i = 0; i < kDisks; ++i) loops.push_back(std::make_unique<LoopDevice>(128 * kMiB));
  std::vector<std::string> errors(kDisks);
  std::vector<std::thread> threads;
  for (int i = 0; i < kDisks; ++i) {
    threads.emplace_back([&, i] {
      auto fail = [&](const char* step, const grpc::Status& s) {
        if (!s.ok() && errors[i].empty()) errors[i] = std::string(step) + ": " + s.error_message();
        return !s.ok();
      };
      const uint32_t number = loops[i]->DiskNumber();
      if (fail("rescan", Rescan()) || fail("partition", PartitionDisk(number))) return;
      std::vector<std::string> ids;
      if (fail("list", v1_.List(number, &ids))) return;
      if (ids.size() != 1) {
        errors[i] = "expected one volume";
        return;
      }
      bool formatted = true;
      if (fail("is formatted", v1_.IsFormatted(ids[0], &formatted))) return;
      if (!formatted && fail("format", v1_.Format(ids[0]))) return;
      const std::string mnt = dir_.MakeDir("kubelet/staging-" + std::to_string(i));
      if (fail("mount", v1_.Mount(ids[0], mnt))) return;
      std::ofstream(mnt + "/who") << i;
      if (ReadFile(mnt + "/who") != std::to_string(i)) errors[i] = "read back";
      if (fail("unmount", v1_.Unmount(ids[0], mnt))) return;
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kDisks; ++i) EXPECT_EQ(errors[i], "") << "disk " << i;
}

// Older clients: v1beta3 runs upstream's sequence with v1's messages; v1alpha1 to v1beta2 (and v1beta3's
// deprecated names) reach the same volumes under the old method names and fields.
class OlderVolumeVersions : public VolumeEndToEnd {
 protected:
  void SetUp() override {
    VolumeEndToEnd::SetUp();
    if (::testing::Test::IsSkipped() || HasFatalFailure()) return;
    std::vector<std::string> endpoints;
    for (const char* v : {"v1beta3", "v1beta2", "v1beta1", "v1alpha1"}) {
      ASSERT_TRUE(testing::SocketAccepts(host_.endpoint(std::string("csi-proxy-volume-") + v))) << v;
    }
    v1beta3_.channel = Channel("v1beta3");
  }
  std::shared_ptr<grpc::Channel> Channel(const std::string& version) {
    return Dial(host_.endpoint("csi-proxy-volume-" + version));
  }
  v1beta3Client v1beta3_;
};

TEST_F(OlderVolumeVersions, UpstreamSequenceV1beta3) { RunUpstreamSequence(v1beta3_, "ext4", "v1beta3"); }

TEST_F(OlderVolumeVersions, OldMethodNamesReachTheSameVolumes) {
  LoopDevice loop(512 * kMiB);
  ASSERT_TRUE(PartitionDisk(loop.DiskNumber()).ok());
  const std::string disk_id = std::to_string(loop.DiskNumber());

  v1alpha1::ListVolumesOnDiskRequest list;
  list.set_disk_id(disk_id);
  v1alpha1::ListVolumesOnDiskResponse volumes;
  ASSERT_TRUE(Call(Channel("v1alpha1"), "/v1alpha1.Volume/ListVolumesOnDisk", list, &volumes).ok());
  ASSERT_EQ(volumes.volume_ids_size(), 1);
  const std::string id = volumes.volume_ids(0);
  list.set_disk_id("-1");
  EXPECT_EQ(Call(Channel("v1alpha1"), "/v1alpha1.Volume/ListVolumesOnDisk", list, &volumes).error_code(),
            Code::INVALID_ARGUMENT);
  v1alpha1::FormatVolumeRequest format;
  format.set_volume_id(id);
  v1alpha1::FormatVolumeResponse formatted;
  ASSERT_TRUE(
      Call(Channel("v1alpha1"), "/v1alpha1.Volume/FormatVolume", format, &formatted, std::chrono::minutes(5)).ok());

  const std::string mnt = dir_.MakeDir("kubelet/old-names");
  v1beta1::MountVolumeRequest mount;
  mount.set_volume_id(id);
  mount.set_path(mnt);
  v1beta1::MountVolumeResponse mounted;
  ASSERT_TRUE(Call(Channel("v1beta1"), "/v1beta1.Volume/MountVolume", mount, &mounted).ok());
  v1beta1::VolumeStatsRequest stats;
  stats.set_volume_id(id);
  v1beta1::VolumeStatsResponse sizes;
  ASSERT_TRUE(Call(Channel("v1beta1"), "/v1beta1.Volume/VolumeStats", stats, &sizes).ok());
  ExpectSizeAround(sizes.volumesize(), PartitionSize(id));
  v1beta1::VolumeDiskNumberRequest disk_number;
  disk_number.set_volume_id(id);
  v1beta1::VolumeDiskNumberResponse number;
  ASSERT_TRUE(Call(Channel("v1beta1"), "/v1beta1.Volume/GetVolumeDiskNumber", disk_number, &number).ok());
  EXPECT_EQ(number.disknumber(), static_cast<int64_t>(loop.DiskNumber()));
  v1beta1::VolumeIDFromMountRequest from_mount;
  from_mount.set_mount(mnt);
  v1beta1::VolumeIDFromMountResponse found;
  ASSERT_TRUE(Call(Channel("v1beta1"), "/v1beta1.Volume/GetVolumeIDFromMount", from_mount, &found).ok());
  EXPECT_EQ(found.volume_id(), id);

  v1beta2::WriteVolumeCacheRequest cache;
  cache.set_volume_id(id);
  v1beta2::WriteVolumeCacheResponse flushed;
  EXPECT_TRUE(Call(Channel("v1beta2"), "/v1beta2.Volume/WriteVolumeCache", cache, &flushed).ok());
  v1beta3::VolumeStatsRequest v1beta3_stats;
  v1beta3_stats.set_volume_id(id);
  v1beta3::VolumeStatsResponse v1beta3_sizes;
  ASSERT_TRUE(Call(Channel("v1beta3"), "/v1beta3.Volume/VolumeStats", v1beta3_stats, &v1beta3_sizes).ok());
  EXPECT_EQ(v1beta3_sizes.volume_size(), sizes.volumesize());

  v1beta3::DismountVolumeRequest dismount;
  dismount.set_volume_id(id);
  dismount.set_path(mnt);
  v1beta3::DismountVolumeResponse dismounted;
  ASSERT_TRUE(Call(Channel("v1beta3"), "/v1beta3.Volume/DismountVolume", dismount, &dismounted).ok());
  EXPECT_EQ(Call(Channel("v1beta1"), "/v1beta1.Volume/GetVolumeIDFromMount", from_mount, &found).error_code(),
            Code::NOT_FOUND);
}

TEST(VolumeGroupConfiguration, AnUnsupportedDefaultFilesystemRefusesTheGroup) {
  HostProcess host("[groups.volume]\nrequired = true\ndefault_fs_type = \"ntfs\"\n");
  EXPECT_FALSE(host.Start({kVolumeV1}, std::chrono::seconds(10)));
  EXPECT_NE(host.log().find("default_fs_type"), std::string::npos) << host.log();
}

}  // namespace
}  // namespace csi_proxy::volume

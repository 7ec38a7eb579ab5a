// A node as CSI drivers written for Windows see it through csi-proxy (issue 22): the real host with the disk,
// volume, filesystem and (optionally) SMB groups, called over their real sockets with upstream's v1 (and
// v2alpha1) messages, one method per call a driver's mounter makes; and the kubelet's side: its directories, the
// paths it hands a driver, and what it checks afterwards (mounts left behind, data on the volume).
//
// Each driver's test (tests/e2e/drivers/<driver>_test.cc) replays that driver's NodeStage, NodePublish,
// NodeGetVolumeStats, NodeExpand, NodeUnpublish and NodeUnstage calls in the order its mounter code makes them,
// on loop disks (block drivers) or a real Samba share (SMB drivers, in the VM lane).
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "block_device_scan_linux.h"
#include "grpc_client.h"
#include "host_process.h"
#include "loop_device.h"
#include "mount_table_linux.h"
#include "v1/disk.pb.h"
#include "v1/filesystem.pb.h"
#include "v1/smb.pb.h"
#include "v1/volume.pb.h"
#include "v2alpha1/filesystem.pb.h"
#include "v2alpha1/volume.pb.h"

namespace csi_proxy::testing::drivers {

// ASSERT_OK(call): the call succeeded; the failure names the call and the server's message.
#define ASSERT_OK(call)                                                                           \
  do {                                                                                            \
    const ::grpc::Status csi_proxy_status_ = (call);                                              \
    ASSERT_TRUE(csi_proxy_status_.ok()) << #call << ": " << csi_proxy_status_.error_code() << " " \
                                        << csi_proxy_status_.error_message();                     \
  } while (0)

constexpr uint64_t kMiB = 1 << 20;

inline std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The node's csi-proxy: one client per group, each method a thin call with upstream's v1 messages.
class CsiNode {
 public:
  // `smb_keys`: the [groups.smb] keys (empty: no SMB group); `host_keys`: more [host] keys (working_dirs).
  explicit CsiNode(const std::string& smb_keys = "", const std::string& host_keys = "")
      : host_(
            "[groups.disk]\nrequired = true\n[groups.volume]\nrequired = true\ndefault_fs_type = \"xfs\"\n"
            "[groups.filesystem]\nrequired = true\n" +
                (smb_keys.empty() ? std::string() : "[groups.smb]\nrequired = true\n" + smb_keys),
            host_keys),
        with_smb_(!smb_keys.empty()) {}

  // Starts the host; false (with the reason in error()) when it does not serve.
  bool Start() {
    std::vector<std::string> endpoints = {"csi-proxy-disk-v1", "csi-proxy-volume-v1", "csi-proxy-volume-v2alpha1",
                                          "csi-proxy-filesystem-v1", "csi-proxy-filesystem-v2alpha1"};
    if (with_smb_) endpoints.push_back("csi-proxy-smb-v1");
    if (!host_.Start(endpoints)) return false;
    disk_ = Dial(host_.endpoint("csi-proxy-disk-v1"));
    volume_ = Dial(host_.endpoint("csi-proxy-volume-v1"));
    volume_v2alpha1_ = Dial(host_.endpoint("csi-proxy-volume-v2alpha1"));
    fs_ = Dial(host_.endpoint("csi-proxy-filesystem-v1"));
    fs_v2alpha1_ = Dial(host_.endpoint("csi-proxy-filesystem-v2alpha1"));
    if (with_smb_) smb_ = Dial(host_.endpoint("csi-proxy-smb-v1"));
    return true;
  }
  // Stops the host (a proxy restart when Start follows); the clients' connections go first.
  int Stop() {
    disk_.reset();
    volume_.reset();
    volume_v2alpha1_.reset();
    fs_.reset();
    fs_v2alpha1_.reset();
    smb_.reset();
    return host_.Stop();
  }
  std::string error() const { return host_.error() + "\n" + host_.log(); }
  HostProcess& host() { return host_; }

  // ---- the kubelet's side ----
  std::string kubelet() const { return host_.kubelet_dir(); }
  // The staging path kubelet gives NodeStageVolume (it creates the directory first).
  std::string StagingPath(const std::string& driver, const std::string& volume) const {
    return kubelet() + "/plugins/kubernetes.io/csi/" + driver + "/" + volume + "/globalmount";
  }
  // The target path kubelet gives NodePublishVolume (it creates the parent, not the target).
  std::string PublishPath(const std::string& pod, const std::string& volume) const {
    return kubelet() + "/pods/" + pod + "/volumes/kubernetes.io~csi/" + volume + "/mount";
  }
  void KubeletMakesDir(const std::string& path) const { std::filesystem::create_directories(path); }
  // Whether a filesystem of `loop` (a partition or the disk) is mounted anywhere.
  static bool AnythingOfDiskMounted(const LoopDevice& loop) {
    auto mounts = common::ReadMountTable();
    if (!mounts.ok()) return true;
    common::BlockDevices devices;
    auto disk = devices.DiskByName(loop.name());
    if (!disk.ok()) return false;
    std::vector<common::BlockDevice> all = {*disk};
    if (auto parts = devices.PartitionsOf(*disk); parts.ok()) all.insert(all.end(), parts->begin(), parts->end());
    for (const auto& d : all) {
      if (!common::MountsOfDevice(*mounts, d).empty()) return true;
    }
    return false;
  }
  static bool Exists(const std::string& path) {
    struct stat st {};
    return lstat(path.c_str(), &st) == 0;
  }

  // ---- filesystem v1 ----
  grpc::Status PathExists(const std::string& path, bool* exists = nullptr) {
    v1::PathExistsRequest req;
    req.set_path(path);
    v1::PathExistsResponse resp;
    auto s = Call(fs_, "/v1.Filesystem/PathExists", req, &resp);
    if (exists) *exists = resp.exists();
    return s;
  }
  grpc::Status Mkdir(const std::string& path) {
    v1::MkdirRequest req;
    req.set_path(path);
    v1::MkdirResponse resp;
    return Call(fs_, "/v1.Filesystem/Mkdir", req, &resp);
  }
  grpc::Status Rmdir(const std::string& path, bool force) {
    v1::RmdirRequest req;
    req.set_path(path);
    req.set_force(force);
    v1::RmdirResponse resp;
    return Call(fs_, "/v1.Filesystem/Rmdir", req, &resp);
  }
  grpc::Status CreateSymlink(const std::string& source, const std::string& target) {
    v1::CreateSymlinkRequest req;
    req.set_source_path(source);
    req.set_target_path(target);
    v1::CreateSymlinkResponse resp;
    return Call(fs_, "/v1.Filesystem/CreateSymlink", req, &resp);
  }
  grpc::Status IsSymlink(const std::string& path, bool* is_symlink = nullptr) {
    v1::IsSymlinkRequest req;
    req.set_path(path);
    v1::IsSymlinkResponse resp;
    auto s = Call(fs_, "/v1.Filesystem/IsSymlink", req, &resp);
    if (is_symlink) *is_symlink = resp.is_symlink();
    return s;
  }
  grpc::Status RmdirContents(const std::string& path) {  // v2alpha1
    v2alpha1::RmdirContentsRequest req;
    req.set_path(path);
    v2alpha1::RmdirContentsResponse resp;
    return Call(fs_v2alpha1_, "/v2alpha1.Filesystem/RmdirContents", req, &resp);
  }

  // ---- disk v1 ----
  grpc::Status Rescan() {
    v1::RescanRequest req;
    v1::RescanResponse resp;
    return Call(disk_, "/v1.Disk/Rescan", req, &resp);
  }
  grpc::Status ListDiskLocations(std::map<uint32_t, v1::DiskLocation>* locations = nullptr) {
    v1::ListDiskLocationsRequest req;
    v1::ListDiskLocationsResponse resp;
    auto s = Call(disk_, "/v1.Disk/ListDiskLocations", req, &resp);
    if (locations) locations->insert(resp.disk_locations().begin(), resp.disk_locations().end());
    return s;
  }
  grpc::Status ListDiskIDs(std::map<uint32_t, v1::DiskIDs>* ids = nullptr) {
    v1::ListDiskIDsRequest req;
    v1::ListDiskIDsResponse resp;
    auto s = Call(disk_, "/v1.Disk/ListDiskIDs", req, &resp);
    if (ids) ids->insert(resp.diskids().begin(), resp.diskids().end());
    return s;
  }
  grpc::Status PartitionDisk(uint32_t disk) {
    v1::PartitionDiskRequest req;
    req.set_disk_number(disk);
    v1::PartitionDiskResponse resp;
    return Call(disk_, "/v1.Disk/PartitionDisk", req, &resp);
  }
  grpc::Status SetDiskState(uint32_t disk, bool online) {
    v1::SetDiskStateRequest req;
    req.set_disk_number(disk);
    req.set_is_online(online);
    v1::SetDiskStateResponse resp;
    return Call(disk_, "/v1.Disk/SetDiskState", req, &resp);
  }
  grpc::Status GetDiskState(uint32_t disk, bool* online) {
    v1::GetDiskStateRequest req;
    req.set_disk_number(disk);
    v1::GetDiskStateResponse resp;
    auto s = Call(disk_, "/v1.Disk/GetDiskState", req, &resp);
    *online = resp.is_online();
    return s;
  }
  grpc::Status GetDiskStats(uint32_t disk, int64_t* total_bytes) {
    v1::GetDiskStatsRequest req;
    req.set_disk_number(disk);
    v1::GetDiskStatsResponse resp;
    auto s = Call(disk_, "/v1.Disk/GetDiskStats", req, &resp);
    *total_bytes = resp.total_bytes();
    return s;
  }

  // ---- volume v1 ----
  grpc::Status ListVolumesOnDisk(uint32_t disk, std::vector<std::string>* ids) {
    v1::ListVolumesOnDiskRequest req;
    req.set_disk_number(disk);
    v1::ListVolumesOnDiskResponse resp;
    auto s = Call(volume_, "/v1.Volume/ListVolumesOnDisk", req, &resp);
    ids->assign(resp.volume_ids().begin(), resp.volume_ids().end());
    return s;
  }
  grpc::Status IsVolumeFormatted(const std::string& id, bool* formatted) {
    v1::IsVolumeFormattedRequest req;
    req.set_volume_id(id);
    v1::IsVolumeFormattedResponse resp;
    auto s = Call(volume_, "/v1.Volume/IsVolumeFormatted", req, &resp);
    *formatted = resp.formatted();
    return s;
  }
  // `fs_type` and `format_options` are csi-proxy's own fields of v1's request (upstream's clients send neither).
  grpc::Status FormatVolume(const std::string& id, const std::string& fs_type = "",
                            const std::vector<std::string>& format_options = {}) {
    v1::FormatVolumeRequest req;
    req.set_volume_id(id);
    req.set_fs_type(fs_type);
    for (const auto& option : format_options) req.add_format_options(option);
    v1::FormatVolumeResponse resp;
    return Call(volume_, "/v1.Volume/FormatVolume", req, &resp, std::chrono::minutes(5));
  }
  grpc::Status MountVolume(const std::string& id, const std::string& target) {
    v1::MountVolumeRequest req;
    req.set_volume_id(id);
    req.set_target_path(target);
    v1::MountVolumeResponse resp;
    return Call(volume_, "/v1.Volume/MountVolume", req, &resp);
  }
  grpc::Status UnmountVolume(const std::string& id, const std::string& target) {
    v1::UnmountVolumeRequest req;
    req.set_volume_id(id);
    req.set_target_path(target);
    v1::UnmountVolumeResponse resp;
    return Call(volume_, "/v1.Volume/UnmountVolume", req, &resp);
  }
  grpc::Status ResizeVolume(const std::string& id, int64_t size_bytes) {
    v1::ResizeVolumeRequest req;
    req.set_volume_id(id);
    req.set_size_bytes(size_bytes);
    v1::ResizeVolumeResponse resp;
    return Call(volume_, "/v1.Volume/ResizeVolume", req, &resp, std::chrono::minutes(5));
  }
  grpc::Status GetVolumeStats(const std::string& id, int64_t* total, int64_t* used = nullptr) {
    v1::GetVolumeStatsRequest req;
    req.set_volume_id(id);
    v1::GetVolumeStatsResponse resp;
    auto s = Call(volume_, "/v1.Volume/GetVolumeStats", req, &resp);
    *total = resp.total_bytes();
    if (used) *used = resp.used_bytes();
    return s;
  }
  grpc::Status GetDiskNumberFromVolumeID(const std::string& id, uint32_t* disk) {
    v1::GetDiskNumberFromVolumeIDRequest req;
    req.set_volume_id(id);
    v1::GetDiskNumberFromVolumeIDResponse resp;
    auto s = Call(volume_, "/v1.Volume/GetDiskNumberFromVolumeID", req, &resp);
    *disk = resp.disk_number();
    return s;
  }
  grpc::Status GetVolumeIDFromTargetPath(const std::string& target, std::string* id) {
    v1::GetVolumeIDFromTargetPathRequest req;
    req.set_target_path(target);
    v1::GetVolumeIDFromTargetPathResponse resp;
    auto s = Call(volume_, "/v1.Volume/GetVolumeIDFromTargetPath", req, &resp);
    *id = resp.volume_id();
    return s;
  }
  grpc::Status WriteVolumeCache(const std::string& id) {
    v1::WriteVolumeCacheRequest req;
    req.set_volume_id(id);
    v1::WriteVolumeCacheResponse resp;
    return Call(volume_, "/v1.Volume/WriteVolumeCache", req, &resp);
  }
  grpc::Status GetClosestVolumeIDFromTargetPath(const std::string& target, std::string* id) {  // v2alpha1
    v2alpha1::GetClosestVolumeIDFromTargetPathRequest req;
    req.set_target_path(target);
    v2alpha1::GetClosestVolumeIDFromTargetPathResponse resp;
    auto s = Call(volume_v2alpha1_, "/v2alpha1.Volume/GetClosestVolumeIDFromTargetPath", req, &resp);
    *id = resp.volume_id();
    return s;
  }

  // ---- smb v1 ----
  grpc::Status NewSmbGlobalMapping(const std::string& remote, const std::string& local, const std::string& user,
                                   const std::string& password) {
    v1::NewSmbGlobalMappingRequest req;
    req.set_remote_path(remote);
    req.set_local_path(local);
    req.set_username(user);
    req.set_password(password);
    v1::NewSmbGlobalMappingResponse resp;
    return Call(smb_, "/v1.Smb/NewSmbGlobalMapping", req, &resp, std::chrono::seconds(120));
  }
  grpc::Status RemoveSmbGlobalMapping(const std::string& remote) {
    v1::RemoveSmbGlobalMappingRequest req;
    req.set_remote_path(remote);
    v1::RemoveSmbGlobalMappingResponse resp;
    return Call(smb_, "/v1.Smb/RemoveSmbGlobalMapping", req, &resp, std::chrono::seconds(120));
  }

 private:
  HostProcess host_;
  bool with_smb_;
  std::shared_ptr<grpc::Channel> disk_, volume_, volume_v2alpha1_, fs_, fs_v2alpha1_, smb_;
};

// The calls GCE PD's, EBS's and vSphere's Windows mounters share (their FormatAndMount and Unmount are the same
// code, copied from driver to driver):
//   FormatAndMount: PartitionDisk, SetDiskState(online), ListVolumesOnDisk (VolumeIds[0]), IsVolumeFormatted,
//   FormatVolume when not formatted, MountVolume(volume, target);
//   UnmountAndTakeOffline: GetVolumeIDFromTargetPath, UnmountVolume, Rmdir(force), GetDiskNumberFromVolumeID,
//   SetDiskState(offline).
// `fs_type` and `format_options`: FormatVolume's own fields (none of these drivers sends them yet).
inline void FormatAndMount(CsiNode& node, uint32_t disk, const std::string& target, const std::string& fs_type = "",
                           const std::vector<std::string>& format_options = {}) {
  ASSERT_OK(node.PartitionDisk(disk));
  ASSERT_OK(node.SetDiskState(disk, true));
  std::vector<std::string> volumes;
  ASSERT_OK(node.ListVolumesOnDisk(disk, &volumes));
  ASSERT_FALSE(volumes.empty());
  bool formatted = false;
  ASSERT_OK(node.IsVolumeFormatted(volumes[0], &formatted));
  if (!formatted) ASSERT_OK(node.FormatVolume(volumes[0], fs_type, format_options));
  ASSERT_OK(node.MountVolume(volumes[0], target));
}

inline void UnmountAndTakeOffline(CsiNode& node, const std::string& staging) {
  std::string volume;
  ASSERT_OK(node.GetVolumeIDFromTargetPath(staging, &volume));
  ASSERT_OK(node.UnmountVolume(volume, staging));
  ASSERT_OK(node.Rmdir(staging, true));
  uint32_t disk = 0;
  ASSERT_OK(node.GetDiskNumberFromVolumeID(volume, &disk));
  ASSERT_OK(node.SetDiskState(disk, false));
}

// A block-volume driver's test: the node, one loop disk (its cloud disk), and skips naming what is missing.
// FormatVolume creates xfs (the node's default_fs_type): the drivers grow mounted volumes, and xfs grows online
// with CAP_SYS_ADMIN alone, where ext4 needs CAP_SYS_RESOURCE too, which a container often lacks (the volume
// group's own tests grow mounted ext4 in the VM lane).
class BlockDriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CSI_PROXY_SKIP_WITHOUT_LOOP_DEVICES();
    for (const char* program : {"mkfs.xfs", "xfs_growfs", "mkfs.ext4"}) {
      if (SystemProgram(program).empty()) GTEST_SKIP() << "needs " << program << " (xfsprogs, e2fsprogs)";
    }
    ASSERT_TRUE(node_.Start()) << node_.error();
    disk_ = std::make_unique<LoopDevice>(kDiskBytes);
  }

  static constexpr uint64_t kDiskBytes = 512 * kMiB;  // xfs needs 300 MiB at least
  static constexpr uint64_t kGrownBytes = 1024 * kMiB;

  // What kubelet sees after NodeUnstageVolume: the staging path gone, nothing of the disk mounted, and, for the
  // drivers that take it offline, the disk offline.
  void ExpectUnstaged(const std::string& staging, bool offline) {
    EXPECT_FALSE(CsiNode::Exists(staging));
    EXPECT_FALSE(CsiNode::AnythingOfDiskMounted(*disk_));
    bool online = offline;
    ASSERT_OK(node_.GetDiskState(disk_->DiskNumber(), &online));
    EXPECT_EQ(online, !offline);
  }

  // The cloud grows the disk (a volume expansion): the loop device's backing file grows.
  void CloudGrowsTheDisk(uint64_t size_bytes) { disk_->Grow(size_bytes); }

  CsiNode node_;
  std::unique_ptr<LoopDevice> disk_;
};

}  // namespace csi_proxy::testing::drivers

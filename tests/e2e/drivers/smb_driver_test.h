// The SMB drivers' tests (csi-driver-smb, azurefile, Trident): the node with the SMB group, and a real Samba share
// (tests/support/samba_server.h) with one sub-directory per volume, as a share several volumes use. They need the
// kernel's CIFS client: they run in the VM lane (tests/vm) and skip elsewhere naming what is missing.
#pragma once

#include <sys/statvfs.h>
#include <unistd.h>

#include "csi_node.h"
#include "samba_server.h"
#include "smb_backend_linux.h"

namespace csi_proxy::testing::drivers {

class SmbDriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to mount";
    if (Status cifs = smb::EnsureKernelCifs(); !cifs.ok()) GTEST_SKIP() << cifs.message();
    if (SystemProgram("mount.cifs").empty()) GTEST_SKIP() << "needs mount.cifs (Debian package cifs-utils)";
    test_support::SambaServerOptions options;
    options.require_encryption = true;
    std::string why_not;
    server_ = test_support::SambaServer::Start(options, &why_not);
    if (!server_) GTEST_SKIP() << "no Samba server: " << why_not;
    for (const char* volume : {"pvc-a", "pvc-b"})
      std::filesystem::create_directories(server_->share_dir() + "/" + volume);
    node_ = std::make_unique<CsiNode>("port = " + std::to_string(server_->port()) + "\nrequire_privacy = true\n");
    ASSERT_TRUE(node_->Start()) << node_->error();
  }

  // A volume of the share as kubelet hands it to `driver`: its directory on the share, its staging and target paths.
  struct Volume {
    std::string name, staging, target;
  };
  // The two volumes (pvc-a for pod a, pvc-b for pod b), with the directories kubelet makes before the calls: the
  // target's parent, and the staging directory when `kubelet_makes_staging`.
  std::pair<Volume, Volume> TwoVolumes(const std::string& driver, bool kubelet_makes_staging) {
    auto make = [&](const std::string& name, const std::string& pod, const std::string& pv) {
      Volume v{name, node_->StagingPath(driver, pv), node_->PublishPath(pod, pv)};
      if (kubelet_makes_staging) node_->KubeletMakesDir(v.staging);
      node_->KubeletMakesDir(std::filesystem::path(v.target).parent_path());
      return v;
    };
    return {make("pvc-a", "pod-a", "pv-a"), make("pvc-b", "pod-b", "pv-b")};
  }

  // \\127.0.0.1\<share>\<volume>: a volume's directory on the share.
  std::string Source(const std::string& volume) const {
    return "\\\\127.0.0.1\\" + server_->share_name() + "\\" + volume;
  }
  // The share's mapping, as Trident and csi-driver-smb name it when they remove it.
  std::string MappingPath() const { return "\\\\127.0.0.1\\" + server_->share_name(); }
  std::string MountPoint() const { return node_->host().dir() + "/state/smb/127.0.0.1/" + server_->share_name(); }
  // Whether the node has the share mounted (the mapping).
  bool ShareMapped() const { return ReadText("/proc/mounts").find(" " + MountPoint() + " cifs ") != std::string::npos; }
  // The pod writes through its volume and reads the file back from the server's side.
  void PodWrites(const std::string& target, const std::string& volume, const std::string& text) {
    { std::ofstream(target + "/" + volume + ".txt") << text; }
    EXPECT_EQ(ReadText(server_->share_dir() + "/" + volume + "/" + volume + ".txt"), text);
  }
  // NodeStageVolume and NodePublishVolume of csi-driver-smb and azurefile, whose node servers and Windows mounters
  // share this code: ensureMountPoint (IsLikelyNotMountPoint: PathExists, IsSymlink when there), prepareStagePath
  // (PathExists, Rmdir force when there), SMBMount: PathExists(parent), Mkdir(parent) when missing,
  // NewSmbGlobalMapping{LocalPath: staging, RemotePath: source}.
  void SmbStage(const std::string& volume, const std::string& staging) {
    bool exists = false, link = false;
    ASSERT_OK(node_->PathExists(staging, &exists));
    if (exists) ASSERT_OK(node_->IsSymlink(staging, &link));
    ASSERT_FALSE(link) << "not staged yet";
    ASSERT_OK(node_->PathExists(staging, &exists));
    if (exists) ASSERT_OK(node_->Rmdir(staging, true));
    ASSERT_OK(node_->PathExists(std::filesystem::path(staging).parent_path(), &exists));
    if (!exists) ASSERT_OK(node_->Mkdir(std::filesystem::path(staging).parent_path()));
    ASSERT_OK(node_->NewSmbGlobalMapping(Source(volume), staging, server_->username(), server_->password()));
  }
  // ensureMountPoint(target) (PathExists), preparePublishPath (PathExists, Rmdir when there), Mount =
  // CreateSymlink(staging -> target).
  void SmbPublish(const std::string& staging, const std::string& target) {
    bool exists = true;
    ASSERT_OK(node_->PathExists(target, &exists));
    ASSERT_OK(node_->PathExists(target, &exists));
    if (exists) ASSERT_OK(node_->Rmdir(target, true));
    ASSERT_OK(node_->CreateSymlink(staging, target));
  }

  // NodeGetVolumeStats of the SMB drivers: the driver's own free-space query of the path (GetDiskFreeSpaceEx on
  // Windows; statfs here), no csi-proxy call.
  static int64_t StatfsTotal(const std::string& path) {
    struct statvfs vfs {};
    if (statvfs(path.c_str(), &vfs) != 0) return -1;
    return static_cast<int64_t>(vfs.f_blocks * vfs.f_frsize);
  }

  std::unique_ptr<test_support::SambaServer> server_;
  std::unique_ptr<CsiNode> node_;
};

}  // namespace csi_proxy::testing::drivers

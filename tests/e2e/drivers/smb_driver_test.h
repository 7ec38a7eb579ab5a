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

// The SMB group end to end on a real kernel CIFS client: the real host serves every SMB API version on its
// sockets and maps a real Samba share (smbd on loopback, tests/support/samba_server.h) through mount.cifs. The
// mount helper is a wrapper that records its argv and then runs the real mount.cifs, so the test sees that the
// password reaches no argv. Needs the kernel's cifs: this runs in the VM lane (tests/vm/README.md) and skips
// elsewhere with a message naming what is missing.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "file_tree.h"
#include "grpc_client.h"
#include "host_process.h"
#include "run_program.h"
#include "samba_server.h"
#include "smb_backend_linux.h"
#include "v1/smb.pb.h"
#include "v1alpha1/smb.pb.h"
#include "v1beta1/smb.pb.h"
#include "v1beta2/smb.pb.h"

namespace csi_proxy::testing {
namespace {

namespace fs = std::filesystem;
using test_support::SambaServer;
using test_support::SambaServerOptions;

class SmbRealShare : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Status cifs = smb::EnsureKernelCifs(); !cifs.ok()) GTEST_SKIP() << cifs.message();
    auto mount_cifs = common::FindSystemProgram("mount.cifs");
    if (!mount_cifs.ok()) GTEST_SKIP() << "needs mount.cifs (Debian package cifs-utils)";
    fs::create_directories(work_.path() + "/record");
    wrapper_ = work_.path() + "/mount-cifs-wrapper.sh";
    std::ofstream script(wrapper_);
    script << "#!/bin/sh\n"
           << "for a in \"$@\"; do printf '%s\\n' \"$a\"; done >> " << work_.path() << "/record/argv\n"
           << "exec " << *mount_cifs << " \"$@\"\n";
    script.close();
    chmod(wrapper_.c_str(), 0700);
  }

  bool StartServer(const SambaServerOptions& options = {}) {
    std::string why_not;
    server_ = SambaServer::Start(options, &why_not);
    EXPECT_NE(server_, nullptr) << "no Samba server: " << why_not;
    return server_ != nullptr;
  }

  void StartHost(bool require_privacy) {
    host_ = std::make_unique<HostProcess>("[groups.smb]\nrequired = true\nmount_root = \"" + mount_root() +
                                          "\"\nport = " + std::to_string(server_->port()) + "\nmount_helper = \"" +
                                          wrapper_ + "\"\nrequire_privacy = " + (require_privacy ? "true" : "false") +
                                          "\n");
    ASSERT_TRUE(
        host_->Start({"csi-proxy-smb-v1", "csi-proxy-smb-v1beta2", "csi-proxy-smb-v1beta1", "csi-proxy-smb-v1alpha1"}))
        << host_->error() << host_->log();
    channel_ = Dial(host_->endpoint("csi-proxy-smb-v1"));
    fs::create_directories(host_->kubelet_dir() + "/pods/pod-1/volumes");
  }

  grpc::Status New(const std::string& remote, const std::string& local, const std::string& password) {
    v1::NewSmbGlobalMappingRequest req;
    req.set_remote_path(remote);
    req.set_local_path(local);
    req.set_username(server_->username());
    req.set_password(password);
    v1::NewSmbGlobalMappingResponse resp;
    return Call(channel_, "/v1.Smb/NewSmbGlobalMapping", req, &resp, std::chrono::seconds(90));
  }
  grpc::Status Remove(const std::string& remote) {
    v1::RemoveSmbGlobalMappingRequest req;
    req.set_remote_path(remote);
    v1::RemoveSmbGlobalMappingResponse resp;
    return Call(channel_, "/v1.Smb/RemoveSmbGlobalMapping", req, &resp, std::chrono::seconds(90));
  }

  // Nothing that could carry the password holds it: the helper's argv, the mount table, the host's log.
  void ExpectPasswordNowhere(const std::string& password) {
    EXPECT_EQ(ReadFile(work_.path() + "/record/argv").find(password), std::string::npos) << "in mount.cifs' argv";
    EXPECT_EQ(ReadFile("/proc/mounts").find(password), std::string::npos) << "in /proc/mounts";
    EXPECT_EQ(ReadFile("/proc/self/mountinfo").find(password), std::string::npos) << "in mountinfo";
    EXPECT_EQ(host_->log().find(password), std::string::npos) << "in the host's log";
  }

  std::string Remote() const { return "\\\\127.0.0.1\\" + server_->share_name(); }
  std::string mount_root() const { return work_.path() + "/smb"; }
  std::string MountPoint() const { return mount_root() + "/127.0.0.1/" + server_->share_name(); }
  bool Mounted() const { return ReadFile("/proc/mounts").find(" " + MountPoint() + " cifs ") != std::string::npos; }

  // Map with a pod symlink, write and read both ways, re-map (idempotent), unmap.
  void MapWriteReadUnmap() {
    const std::string local = host_->kubelet_dir() + "/pods/pod-1/volumes/share";
    fs::create_directories(server_->share_dir() + "/pvc-1");
    auto s = New(Remote() + "\\pvc-1", local, server_->password());
    ASSERT_TRUE(s.ok()) << s.error_message() << "\n" << host_->log();
    EXPECT_TRUE(Mounted());
    EXPECT_EQ(fs::read_symlink(local), MountPoint() + "/pvc-1");
    { std::ofstream(local + "/from-pod.txt") << "written through the pod's link"; }
    EXPECT_EQ(ReadFile(server_->share_dir() + "/pvc-1/from-pod.txt"), "written through the pod's link");
    { std::ofstream(server_->share_dir() + "/pvc-1/from-server.txt") << "written on the server"; }
    EXPECT_EQ(ReadFile(local + "/from-server.txt"), "written on the server");
    auto listing = server_->Smbclient("ls pvc-1/from-pod.txt", server_->username(), server_->password());
    EXPECT_EQ(listing.exit_code, 0) << listing.output;

    s = New(Remote() + "\\pvc-1", local, server_->password());
    EXPECT_TRUE(s.ok()) << "mapping the same share and link again: " << s.error_message();
    ExpectPasswordNowhere(server_->password());

    ASSERT_TRUE(Remove(Remote()).ok());
    EXPECT_TRUE(Mounted()) << "the pod's link still uses the mapping: it stays";
    fs::remove(local);
    ASSERT_TRUE(Remove(Remote()).ok());
    EXPECT_FALSE(Mounted());
    EXPECT_TRUE(ListTree(mount_root()).empty());
    EXPECT_TRUE(Remove(Remote()).ok()) << "removing again is success";
  }

  TempDir work_;
  std::string wrapper_;
  std::unique_ptr<SambaServer> server_;
  std::unique_ptr<HostProcess> host_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(SmbRealShare, MapWriteReadUnmapWithPrivacyRequired) {
  SambaServerOptions options;
  options.require_encryption = true;
  ASSERT_TRUE(StartServer(options));
  StartHost(/*require_privacy=*/true);
  MapWriteReadUnmap();
  EXPECT_NE(ReadFile(work_.path() + "/record/argv").find("seal"), std::string::npos);
}

TEST_F(SmbRealShare, MapWriteReadUnmapWithoutPrivacy) {
  ASSERT_TRUE(StartServer());
  StartHost(/*require_privacy=*/false);
  MapWriteReadUnmap();
  EXPECT_EQ(ReadFile(work_.path() + "/record/argv").find("seal"), std::string::npos);
}

TEST_F(SmbRealShare, AWrongPasswordIsPermissionDeniedAndLeavesNothing) {
  ASSERT_TRUE(StartServer());
  StartHost(true);
  const std::string wrong = "Wrong-Passw0rd-" + std::to_string(getpid());
  const std::string local = host_->kubelet_dir() + "/pods/pod-1/volumes/share";
  auto s = New(Remote(), local, wrong);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_EQ(s.error_message().find(wrong), std::string::npos);
  EXPECT_FALSE(Mounted());
  EXPECT_TRUE(ListTree(mount_root()).empty());
  EXPECT_FALSE(fs::exists(fs::symlink_status(local)));
  ExpectPasswordNowhere(wrong);
}

TEST_F(SmbRealShare, AMissingShareIsNotFoundAndLeavesNothing) {
  ASSERT_TRUE(StartServer());
  StartHost(true);
  auto s = New("//127.0.0.1/no-such-share", "", server_->password());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  EXPECT_TRUE(ListTree(mount_root()).empty());
}

TEST_F(SmbRealShare, AMappingWhoseServerWentAwayIsReplacedOnTheNextMapping) {
  ASSERT_TRUE(StartServer());
  StartHost(true);
  ASSERT_TRUE(New(Remote(), "", server_->password()).ok()) << host_->log();
  const std::string remote = Remote(), mount_point = MountPoint(), password = server_->password();
  server_.reset();  // the share becomes unreachable
  v1::NewSmbGlobalMappingRequest req;
  req.set_remote_path(remote);
  req.set_username("csiuser");
  req.set_password(password);
  v1::NewSmbGlobalMappingResponse resp;
  auto s = Call(channel_, "/v1.Smb/NewSmbGlobalMapping", req, &resp, std::chrono::seconds(120));
  EXPECT_FALSE(s.ok()) << "the remount cannot reach the server either";
  EXPECT_EQ(ReadFile("/proc/mounts").find(" " + mount_point + " "), std::string::npos);
  EXPECT_TRUE(ListTree(mount_root()).empty());
  EXPECT_TRUE(host_->running());
}

// Every served API version maps and unmaps the same real share.
TEST_F(SmbRealShare, EveryServedVersionMapsAndUnmaps) {
  ASSERT_TRUE(StartServer());
  StartHost(true);
#define CSI_PROXY_MAP_UNMAP(ns, socket_name)                                                                        \
  {                                                                                                                 \
    SCOPED_TRACE(#ns);                                                                                              \
    auto channel = Dial(host_->endpoint(socket_name));                                                              \
    ns::NewSmbGlobalMappingRequest req;                                                                             \
    req.set_remote_path(Remote());                                                                                  \
    req.set_username(server_->username());                                                                          \
    req.set_password(server_->password());                                                                          \
    ns::NewSmbGlobalMappingResponse resp;                                                                           \
    auto s = Call(channel, "/" #ns ".Smb/NewSmbGlobalMapping", req, &resp, std::chrono::seconds(90));               \
    ASSERT_TRUE(s.ok()) << s.error_message();                                                                       \
    EXPECT_TRUE(Mounted());                                                                                         \
    ns::RemoveSmbGlobalMappingRequest rm;                                                                           \
    rm.set_remote_path(Remote());                                                                                   \
    ns::RemoveSmbGlobalMappingResponse rm_resp;                                                                     \
    ASSERT_TRUE(Call(channel, "/" #ns ".Smb/RemoveSmbGlobalMapping", rm, &rm_resp, std::chrono::seconds(90)).ok()); \
    EXPECT_FALSE(Mounted());                                                                                        \
  }
  CSI_PROXY_MAP_UNMAP(v1, "csi-proxy-smb-v1")
  CSI_PROXY_MAP_UNMAP(v1beta2, "csi-proxy-smb-v1beta2")
  CSI_PROXY_MAP_UNMAP(v1beta1, "csi-proxy-smb-v1beta1")
  CSI_PROXY_MAP_UNMAP(v1alpha1, "csi-proxy-smb-v1alpha1")
#undef CSI_PROXY_MAP_UNMAP
  ExpectPasswordNowhere(server_->password());
  EXPECT_TRUE(ListTree(mount_root()).empty());
}

}  // namespace
}  // namespace csi_proxy::testing

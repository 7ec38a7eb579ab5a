// The SMB group end to end: the real host loads the real group library and serves csi-proxy-smb-v1 (and the
// older versions) on Unix sockets; a gRPC client sends the bytes any csi-proxy client sends. The group's mount
// helper is pointed at a recording script, so the test sees every program the group runs and what it got.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "file_tree.h"
#include "grpc_client.h"
#include "host_process.h"
#include "samba_server.h"
#include "smb_backend_linux.h"
#include "v1/smb.pb.h"
#include "v1alpha1/smb.pb.h"
#include "v1beta1/smb.pb.h"
#include "v1beta2/smb.pb.h"

namespace csi_proxy::testing {
namespace {

namespace fs = std::filesystem;

constexpr const char* kV1 = "csi-proxy-smb-v1";

class SmbEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(work_.path() + "/record");
    helper_ = work_.path() + "/mount-helper.sh";
    std::ofstream script(helper_);
    script << "#!/bin/sh\n"
           << "for a in \"$@\"; do printf '%s\\n' \"$a\"; done > " << work_.path() << "/record/argv\n"
           << "env > " << work_.path() << "/record/env\n"
           << "echo 'mount error(13): Permission denied' >&2\nexit 32\n";
    script.close();
    chmod(helper_.c_str(), 0700);
  }

  void StartHost(const std::string& mount_helper, uint16_t port = 445) {
    host_ = std::make_unique<HostProcess>(
        "[groups.smb]\nrequired = true\nmount_root = \"" + mount_root() + "\"\nport = " + std::to_string(port) +
        (mount_helper.empty() ? "" : "\nmount_helper = \"" + mount_helper + "\"") + "\n");
    ASSERT_TRUE(host_->Start({kV1, "csi-proxy-smb-v1beta2", "csi-proxy-smb-v1beta1", "csi-proxy-smb-v1alpha1"}))
        << host_->error() << host_->log();
    channel_ = Dial(host_->endpoint(kV1));
    fs::create_directories(host_->kubelet_dir() + "/pods/pod-1/volumes");
  }

  grpc::Status New(const std::string& remote, const std::string& local, const std::string& user,
                   const std::string& password) {
    v1::NewSmbGlobalMappingRequest req;
    req.set_remote_path(remote);
    req.set_local_path(local);
    req.set_username(user);
    req.set_password(password);
    v1::NewSmbGlobalMappingResponse resp;
    return Call(channel_, "/v1.Smb/NewSmbGlobalMapping", req, &resp);
  }
  grpc::Status Remove(const std::string& remote) {
    v1::RemoveSmbGlobalMappingRequest req;
    req.set_remote_path(remote);
    v1::RemoveSmbGlobalMappingResponse resp;
    return Call(channel_, "/v1.Smb/RemoveSmbGlobalMapping", req, &resp);
  }

  std::string mount_root() const { return work_.path() + "/smb"; }
  bool HelperRan() const { return fs::exists(work_.path() + "/record/argv"); }

  TempDir work_;
  std::string helper_;
  std::unique_ptr<HostProcess> host_;
  std::shared_ptr<grpc::Channel> channel_;
};

// The kernel check, through the real host: FAILED_PRECONDITION naming cifs, no program run, nothing created, and
// the password in neither the answer nor the host's log.
TEST_F(SmbEndToEnd, WithoutKernelCifsMappingIsFailedPreconditionAndLeavesNothing) {
  if (smb::EnsureKernelCifs().ok()) GTEST_SKIP() << "this kernel has cifs";
  StartHost(helper_);
  const std::string password = "E2e-Secret;$(id)," + std::to_string(getpid());
  const std::string local = host_->kubelet_dir() + "/pods/pod-1/volumes/share";
  auto s = New("\\\\127.0.0.1\\data", local, "CORP\\csiuser", password);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_NE(s.error_message().find("no CIFS/SMB client"), std::string::npos) << s.error_message();
  EXPECT_EQ(s.error_message().find("E2e-Secret"), std::string::npos);
  EXPECT_FALSE(HelperRan());
  EXPECT_TRUE(ListTree(mount_root()).empty());
  EXPECT_FALSE(fs::exists(fs::symlink_status(local)));
  EXPECT_NE(host_->log().find("no CIFS/SMB client"), std::string::npos) << "the start-up warning is missing";
  EXPECT_EQ(host_->log().find("E2e-Secret"), std::string::npos);
}

TEST_F(SmbEndToEnd, RefusalsCarryTheRightCodesAndNoPassword) {
  StartHost(helper_);
  const std::string password = "Refusal-Secret-" + std::to_string(getpid());
  auto s = New("not-a-unc-path", "", "csiuser", password);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  s = New("//127.0.0.1/data", "/etc/evil-link", "csiuser", password);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  s = New("//127.0.0.1/data", host_->kubelet_dir() + "/no/such/parent/link", "csiuser", password);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  s = New("//127.0.0.1/data", "", "", password);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  s = New("//127.0.0.1/data", "", "csiuser", "new\nline");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_FALSE(HelperRan());
  EXPECT_EQ(host_->log().find(password), std::string::npos);
}

TEST_F(SmbEndToEnd, RemovingAShareThatIsNotMappedSucceedsOnEveryVersion) {
  StartHost(helper_);
  EXPECT_TRUE(Remove("\\\\127.0.0.1\\data").ok());
  v1beta2::RemoveSmbGlobalMappingRequest b2;
  b2.set_remote_path("//127.0.0.1/data");
  v1beta2::RemoveSmbGlobalMappingResponse b2r;
  EXPECT_TRUE(
      Call(Dial(host_->endpoint("csi-proxy-smb-v1beta2")), "/v1beta2.Smb/RemoveSmbGlobalMapping", b2, &b2r).ok());
  v1beta1::RemoveSmbGlobalMappingRequest b1;
  b1.set_remote_path("//127.0.0.1/data");
  v1beta1::RemoveSmbGlobalMappingResponse b1r;
  EXPECT_TRUE(
      Call(Dial(host_->endpoint("csi-proxy-smb-v1beta1")), "/v1beta1.Smb/RemoveSmbGlobalMapping", b1, &b1r).ok());
  EXPECT_EQ(b1r.error(), "");
  v1alpha1::NewSmbGlobalMappingRequest a1;
  a1.set_remote_path("bad");
  v1alpha1::NewSmbGlobalMappingResponse a1r;
  EXPECT_EQ(
      Call(Dial(host_->endpoint("csi-proxy-smb-v1alpha1")), "/v1alpha1.Smb/NewSmbGlobalMapping", a1, &a1r).error_code(),
      grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_FALSE(HelperRan());
}

TEST_F(SmbEndToEnd, MetacharactersInAnyFieldAreRefusedAndNothingRuns) {
  StartHost(helper_);
  const auto kubelet_before = ListTree(host_->kubelet_dir());
  for (const std::string bad : {";id", "$(id)", "`id`", "|id", " x", ",seal", "=1", "\nx", "'", "\""}) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(New("//127.0.0.1" + bad + "/data", "", "u", "p").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(New("//127.0.0.1/data" + bad, "", "u", "p").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(New("//127.0.0.1/data/sub" + bad, "", "u", "p").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(New("//127.0.0.1/data", "", "u" + bad, "p").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(Remove("//127.0.0.1/data" + bad).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(New("//127.0.0.1/data", "/" + bad, "u", "p").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  }
  EXPECT_FALSE(HelperRan());
  EXPECT_TRUE(ListTree(mount_root()).empty());
  EXPECT_EQ(ListTree(host_->kubelet_dir()), kubelet_before);
}

TEST_F(SmbEndToEnd, ABadGroupKeyRefusesTheGroupWithAClearMessage) {
  HostProcess host("[groups.smb]\nrequired = true\nmount_helper = \"relative/helper\"\n");
  EXPECT_FALSE(host.Start({kV1}, std::chrono::seconds(10)));
  // The key's file and line, and what it must be.
  EXPECT_NE(host.log().find(host.config_path() + ":"), std::string::npos) << host.log();
  EXPECT_NE(host.log().find(": groups.smb.mount_helper: group key 'mount_helper' must be an absolute path"),
            std::string::npos)
      << host.log();
}

TEST_F(SmbEndToEnd, AnUnknownGroupKeyRefusesTheGroup) {
  HostProcess host("[groups.smb]\nrequired = true\nrequire_privasy = false\n");
  EXPECT_FALSE(host.Start({kV1}, std::chrono::seconds(10)));
  EXPECT_NE(host.log().find("unknown key 'require_privasy' in [groups.smb]"), std::string::npos) << host.log();
}

// Where the kernel has cifs: the whole flow through the host against a real Samba share.
TEST_F(SmbEndToEnd, MapWriteReadUnmapAgainstARealSambaShare) {
  if (Status cifs = smb::EnsureKernelCifs(); !cifs.ok()) GTEST_SKIP() << cifs.message();
  std::string why_not;
  auto server = test_support::SambaServer::Start(test_support::SambaServerOptions{}, &why_not);
  if (!server) GTEST_SKIP() << "no Samba server: " << why_not;
  StartHost("", server->port());
  const std::string remote = "\\\\127.0.0.1\\" + server->share_name();
  const std::string local = host_->kubelet_dir() + "/pods/pod-1/volumes/share";
  auto s = New(remote, local, server->username(), server->password());
  ASSERT_TRUE(s.ok()) << s.error_message() << "\n" << host_->log();
  std::ofstream(local + "/hello.txt") << "through the proxy";
  EXPECT_EQ(ReadFile(server->share_dir() + "/hello.txt"), "through the proxy");
  auto listing = server->Smbclient("ls hello.txt", server->username(), server->password());
  EXPECT_EQ(listing.exit_code, 0) << listing.output;
  ASSERT_TRUE(Remove(remote).ok());
  EXPECT_FALSE(ListTree(mount_root()).empty()) << "the pod's link still uses the mapping: it stays";
  fs::remove(local);
  ASSERT_TRUE(Remove(remote).ok());
  EXPECT_TRUE(ListTree(mount_root()).empty());
  EXPECT_EQ(host_->log().find(server->password()), std::string::npos);
}

}  // namespace
}  // namespace csi_proxy::testing

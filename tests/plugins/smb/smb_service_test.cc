// The SMB service with the real Linux backend: the password's only way to the mount helper, the refusals, the
// kernel check, the injection suite, and (where the kernel has cifs) a real mount of a real Samba share.
#include "smb_service.h"

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include <gtest/gtest.h>

#include "file_tree.h"
#include "mount_table_linux.h"
#include "samba_server.h"
#include "smb_backend_linux.h"
#include "temp_dir.h"

namespace csi_proxy::smb {
namespace {

namespace fs = std::filesystem;
using test_support::SambaServer;
using test_support::SambaServerOptions;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

bool IsMounted(const std::string& path) {
  auto table = common::ReadMountTable();
  if (!table.ok()) return false;
  for (const auto& e : *table) {
    if (e.target == path) return true;
  }
  return false;
}

class SmbServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_.path();
    kubelet_ = root_ + "/kubelet";
    mount_root_ = root_ + "/state/smb";
    record_ = root_ + "/record";
    fs::create_directories(kubelet_ + "/pods/pod-1/volumes");
    fs::create_directories(record_);
  }

  void TearDown() override {
    service_.reset();
    // A test that mounted must not leave the mount behind, even when it failed half way.
    for (const auto& e : testing::ListTree(mount_root_)) {
      if (IsMounted(e)) umount2(e.c_str(), MNT_DETACH);
    }
  }

  // A stand-in for mount.cifs that records its argv, environment and stdin, then prints `message` and exits with
  // `exit_code`, mounting nothing.
  std::string RecordingHelper(int exit_code, const std::string& message) {
    std::string path = root_ + "/mount-helper.sh";
    std::ofstream script(path);
    script << "#!/bin/sh\n"
           << "for a in \"$@\"; do printf '%s\\n' \"$a\"; done > " << record_ << "/argv\n"
           << "env > " << record_ << "/env\n"
           << "cat > " << record_ << "/stdin\n"
           << "echo '" << message << "' >&2\n"
           << "exit " << exit_code << "\n";
    script.close();
    chmod(path.c_str(), 0700);
    return path;
  }

  bool HelperRan() const { return fs::exists(record_ + "/argv"); }

  // `cifs_ok`: pretend the kernel has cifs so the call reaches the helper (this machine's kernel has none).
  void MakeService(const std::string& helper, bool cifs_ok, bool require_privacy = true, uint16_t port = 445) {
    LinuxSmbOptions options;
    options.mount_root = mount_root_;
    options.state_dir = root_ + "/state";
    options.mount_helper = helper;
    options.require_privacy = require_privacy;
    options.port = port;
    if (cifs_ok) options.cifs_support = [] { return Status::Ok(); };
    options.log = [this](LogLevel, std::string_view line) {
      std::lock_guard lock(log_mu_);
      log_ += std::string(line) + "\n";
    };
    auto policy = common::PathPolicy::Create(kubelet_, {});
    ASSERT_TRUE(policy.ok()) << policy.status().message();
    auto backend = MakeLinuxSmbBackend(options, *policy);
    ASSERT_TRUE(backend.ok()) << backend.status().message();
    service_ = std::make_unique<SmbService>(std::move(*backend), *policy, options.log);
  }

  std::string Log() {
    std::lock_guard lock(log_mu_);
    return log_;
  }

  testing::TempDir dir_;
  std::string root_, kubelet_, mount_root_, record_;
  std::unique_ptr<SmbService> service_;
  std::mutex log_mu_;
  std::string log_;
};

// The secret-handling proof: the password (full of shell and option characters) reaches the mount helper in its
// environment, byte for byte, and nowhere else: not in its argv, not on its stdin, not in the log, not in the
// error, not in any file the call leaves.
TEST_F(SmbServiceTest, PasswordReachesTheMountHelperOnlyThroughItsEnvironment) {
  MakeService(RecordingHelper(32, "mount error(13): Permission denied"), /*cifs_ok=*/true);
  const std::string password = "Pa55,w0rd=x;$(touch " + root_ + "/pwned)`id` 'q\"|&<>";
  auto status = service_->NewSmbGlobalMapping("\\\\127.0.0.1\\data", kubelet_ + "/pods/pod-1/volumes/smb",
                                              "CORP\\csiuser", password);
  ASSERT_TRUE(HelperRan());
  EXPECT_EQ(status.code(), Code::kPermissionDenied) << status.message();

  std::string argv = testing::ReadFile(record_ + "/argv");
  EXPECT_EQ(argv.find(password), std::string::npos) << argv;
  EXPECT_EQ(argv.find("Pa55"), std::string::npos) << argv;
  EXPECT_EQ(testing::ReadFile(record_ + "/stdin"), "");
  auto env = Lines(testing::ReadFile(record_ + "/env"));
  EXPECT_NE(std::find(env.begin(), env.end(), "PASSWD=" + password), env.end()) << testing::ReadFile(record_ + "/env");

  EXPECT_EQ(status.message().find("Pa55"), std::string::npos) << status.message();
  EXPECT_EQ(Log().find("Pa55"), std::string::npos) << Log();
  EXPECT_FALSE(fs::exists(root_ + "/pwned"));
  for (const auto& file : testing::ListTree(root_)) {
    if (file.rfind(record_, 0) == 0 || !fs::is_regular_file(file)) continue;
    EXPECT_EQ(testing::ReadFile(file).find("Pa55"), std::string::npos) << file;
  }
}

TEST_F(SmbServiceTest, MountHelperGetsTheShareTheMountPointAndTheOptions) {
  MakeService(RecordingHelper(32, "mount error(13): Permission denied"), true, /*require_privacy=*/true, 1445);
  (void)service_->NewSmbGlobalMapping("//127.0.0.1/Data/sub", "", "CORP\\csiuser", "pw");
  EXPECT_EQ(Lines(testing::ReadFile(record_ + "/argv")),
            (std::vector<std::string>{"//127.0.0.1/data", mount_root_ + "/127.0.0.1/data", "-o",
                                      "username=csiuser,domain=CORP,port=1445,seal,nosuid,nodev"}));
}

TEST_F(SmbServiceTest, WithoutRequirePrivacyThereIsNoSeal) {
  MakeService(RecordingHelper(32, "mount error(13): Permission denied"), true, /*require_privacy=*/false);
  (void)service_->NewSmbGlobalMapping("//127.0.0.1/data", "", "csiuser", "pw");
  EXPECT_EQ(Lines(testing::ReadFile(record_ + "/argv")).back(), "username=csiuser,nosuid,nodev");
}

TEST_F(SmbServiceTest, GuestMappingPassesNoPasswordAtAll) {
  MakeService(RecordingHelper(32, "mount error(13): Permission denied"), true);
  (void)service_->NewSmbGlobalMapping("//127.0.0.1/data", "", "", "");
  EXPECT_EQ(Lines(testing::ReadFile(record_ + "/argv")).back(), "guest,seal,nosuid,nodev");
  EXPECT_EQ(testing::ReadFile(record_ + "/env").find("PASSWD"), std::string::npos);
}

TEST_F(SmbServiceTest, FailedMountLeavesNothingBehind) {
  MakeService(RecordingHelper(32, "mount error(112): Host is down"), true);
  auto status =
      service_->NewSmbGlobalMapping("//fs1.example.com/data", kubelet_ + "/pods/pod-1/volumes/smb", "csiuser", "pw");
  EXPECT_EQ(status.code(), Code::kUnavailable) << status.message();
  EXPECT_NE(status.message().find("Host is down"), std::string::npos) << status.message();
  EXPECT_TRUE(testing::ListTree(mount_root_).empty());
  EXPECT_FALSE(fs::exists(fs::symlink_status(kubelet_ + "/pods/pod-1/volumes/smb")));
}

TEST_F(SmbServiceTest, HelperThatReportsSuccessButMountsNothingIsAnError) {
  MakeService(RecordingHelper(0, ""), true);
  auto status = service_->NewSmbGlobalMapping("//127.0.0.1/data", "", "csiuser", "pw");
  EXPECT_EQ(status.code(), Code::kInternal) << status.message();
  EXPECT_TRUE(testing::ListTree(mount_root_).empty());
}

// This machine's kernel has no cifs: the call says so, runs nothing and leaves nothing.
TEST_F(SmbServiceTest, WithoutKernelCifsTheCallIsFailedPreconditionAndNothingIsLeft) {
  if (EnsureKernelCifs().ok()) GTEST_SKIP() << "this kernel has cifs";
  MakeService(RecordingHelper(0, ""), /*cifs_ok=*/false);
  const std::string local = kubelet_ + "/pods/pod-1/volumes/smb";
  auto status = service_->NewSmbGlobalMapping("//127.0.0.1/data", local, "csiuser", "Secret-Pw-1");
  EXPECT_EQ(status.code(), Code::kFailedPrecondition) << status.message();
  EXPECT_NE(status.message().find("cifs"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("/proc/filesystems"), std::string::npos) << status.message();
  EXPECT_EQ(status.message().find("Secret-Pw-1"), std::string::npos);
  EXPECT_FALSE(HelperRan());
  EXPECT_TRUE(testing::ListTree(mount_root_).empty());
  EXPECT_FALSE(fs::exists(fs::symlink_status(local)));
}

TEST_F(SmbServiceTest, LocalPathOutsideTheAllowedRootsIsRefusedBeforeMounting) {
  MakeService(RecordingHelper(0, ""), true);
  auto status = service_->NewSmbGlobalMapping("//127.0.0.1/data", root_ + "/elsewhere", "csiuser", "pw");
  EXPECT_EQ(status.code(), Code::kPermissionDenied) << status.message();
  status = service_->NewSmbGlobalMapping("//127.0.0.1/data", kubelet_ + "-evil/x", "csiuser", "pw");
  EXPECT_EQ(status.code(), Code::kPermissionDenied) << status.message();
  status = service_->NewSmbGlobalMapping("//127.0.0.1/data", kubelet_ + "/../x", "csiuser", "pw");
  EXPECT_EQ(status.code(), Code::kInvalidArgument) << status.message();
  EXPECT_FALSE(HelperRan());
}

TEST_F(SmbServiceTest, LocalPathThroughASymlinkLeavingTheRootsIsRefusedBeforeMounting) {
  fs::create_directories(root_ + "/outside");
  fs::create_directory_symlink(root_ + "/outside", kubelet_ + "/escape");
  MakeService(RecordingHelper(0, ""), true);
  auto status = service_->NewSmbGlobalMapping("//127.0.0.1/data", kubelet_ + "/escape/link", "csiuser", "pw");
  EXPECT_EQ(status.code(), Code::kPermissionDenied) << status.message();
  EXPECT_FALSE(HelperRan());
  EXPECT_TRUE(fs::is_empty(root_ + "/outside"));
}

TEST_F(SmbServiceTest, LocalPathWithAMissingParentIsNotFoundBeforeMounting) {
  MakeService(RecordingHelper(0, ""), true);
  auto status = service_->NewSmbGlobalMapping("//127.0.0.1/data", kubelet_ + "/missing/dir/link", "csiuser", "pw");
  EXPECT_EQ(status.code(), Code::kNotFound) << status.message();
  EXPECT_FALSE(HelperRan());
}

TEST_F(SmbServiceTest, ExistingLocalPathIsAlreadyExistsBeforeMounting) {
  fs::create_directories(kubelet_ + "/pods/pod-1/volumes/taken");
  MakeService(RecordingHelper(0, ""), true);
  auto status =
      service_->NewSmbGlobalMapping("//127.0.0.1/data", kubelet_ + "/pods/pod-1/volumes/taken", "csiuser", "pw");
  EXPECT_EQ(status.code(), Code::kAlreadyExists) << status.message();
  EXPECT_FALSE(HelperRan());
}

TEST_F(SmbServiceTest, RemovingAShareThatIsNotMappedSucceeds) {
  MakeService(RecordingHelper(0, ""), true);
  EXPECT_TRUE(service_->RemoveSmbGlobalMapping("\\\\127.0.0.1\\data").ok());
  EXPECT_TRUE(service_->RemoveSmbGlobalMapping("\\\\127.0.0.1\\data").ok());
  EXPECT_FALSE(HelperRan());
}

// Shell and mount-option metacharacters in every string field: refused, the helper never runs, nothing is
// created in the mount root or the kubelet tree.
TEST_F(SmbServiceTest, MetacharactersInAnyFieldAreRefusedAndNothingRuns) {
  MakeService(RecordingHelper(0, ""), true);
  const auto kubelet_before = testing::ListTree(kubelet_);
  const std::vector<std::string> payloads = {";touch /tmp/pwned",
                                             "$(touch /tmp/pwned)",
                                             "`touch /tmp/pwned`",
                                             "|id",
                                             "&id",
                                             ">/tmp/f",
                                             "<x",
                                             " x",
                                             ",password=x",
                                             ",uid=0",
                                             "=x",
                                             "\nx",
                                             "'x",
                                             "\"x",
                                             "*",
                                             "?",
                                             "{a,b}",
                                             "\tx",
                                             std::string("\0x", 2)};
  const std::string good_local = kubelet_ + "/pods/pod-1/volumes/smb";
  for (const auto& bad : payloads) {
    SCOPED_TRACE(::testing::PrintToString(bad));
    EXPECT_EQ(service_->NewSmbGlobalMapping("//127.0.0.1" + bad + "/data", "", "u", "p").code(),
              Code::kInvalidArgument);
    EXPECT_EQ(service_->NewSmbGlobalMapping("//127.0.0.1/data" + bad, "", "u", "p").code(), Code::kInvalidArgument);
    EXPECT_EQ(service_->NewSmbGlobalMapping("//127.0.0.1/data/sub" + bad, "", "u", "p").code(), Code::kInvalidArgument);
    EXPECT_EQ(service_->NewSmbGlobalMapping("//127.0.0.1/data", "", "user" + bad, "p").code(), Code::kInvalidArgument);
    EXPECT_EQ(service_->NewSmbGlobalMapping("//127.0.0.1/data", "", "DOM" + bad + "\\user", "p").code(),
              Code::kInvalidArgument);
    EXPECT_EQ(service_->RemoveSmbGlobalMapping("//127.0.0.1/data" + bad).code(), Code::kInvalidArgument);
    // local_path: shell characters are plain file name bytes on Linux, so they are refused only where the path
    // rules refuse them (outside the roots, NUL); either way nothing may run or be created.
    (void)service_->NewSmbGlobalMapping("//127.0.0.1/data", "/etc/" + bad, "u", "p");
    (void)service_->NewSmbGlobalMapping("//127.0.0.1/data", kubelet_ + "/missing/" + bad, "u", "p");
  }
  EXPECT_EQ(service_->NewSmbGlobalMapping("//127.0.0.1/data", "relative" + std::string("\0x", 2), "u", "p").code(),
            Code::kInvalidArgument);
  EXPECT_FALSE(HelperRan());
  EXPECT_TRUE(testing::ListTree(mount_root_).empty());
  EXPECT_EQ(testing::ListTree(kubelet_), kubelet_before);
  EXPECT_FALSE(fs::exists("/tmp/pwned"));
}

// ---- Real mounts: only where the kernel has cifs --------------------------------------------------------------

#define REAL_MOUNT_PRECONDITIONS(server)                                            \
  if (Status cifs = EnsureKernelCifs(); !cifs.ok()) GTEST_SKIP() << cifs.message(); \
  std::string why_not_server;                                                       \
  auto server = SambaServer::Start(SambaServerOptions{}, &why_not_server);          \
  if (!server) GTEST_SKIP() << "no Samba server: " << why_not_server

TEST_F(SmbServiceTest, MapWriteReadUnmapAgainstARealSambaShare) {
  REAL_MOUNT_PRECONDITIONS(server);
  MakeService("", /*cifs_ok=*/false, /*require_privacy=*/true, server->port());
  const std::string remote = "\\\\127.0.0.1\\" + server->share_name();
  const std::string local = kubelet_ + "/pods/pod-1/volumes/smb";
  fs::create_directories(server->share_dir() + "/pvc-1");

  ASSERT_TRUE(service_->NewSmbGlobalMapping(remote + "\\pvc-1", local, server->username(), server->password()).ok());
  const std::string mount_point = mount_root_ + "/127.0.0.1/" + server->share_name();
  EXPECT_TRUE(IsMounted(mount_point));
  EXPECT_EQ(fs::read_symlink(local), mount_point + "/pvc-1");

  std::ofstream(local + "/hello.txt") << "written through the mapping";
  EXPECT_EQ(testing::ReadFile(server->share_dir() + "/pvc-1/hello.txt"), "written through the mapping");
  std::ofstream(server->share_dir() + "/pvc-1/from-server.txt") << "written on the server";
  EXPECT_EQ(testing::ReadFile(local + "/from-server.txt"), "written on the server");

  // Mapping the same share again, even with another sub-path, reuses the healthy mapping.
  ASSERT_TRUE(service_->NewSmbGlobalMapping(remote, "", server->username(), server->password()).ok());
  // So does the same call again, link included.
  ASSERT_TRUE(service_->NewSmbGlobalMapping(remote + "\\pvc-1", local, server->username(), server->password()).ok());

  // The pod's link still uses the mapping: removing it answers OK and the mapping stays (issue 22: Trident
  // removes mappings unconditionally, also while another volume uses the share).
  ASSERT_TRUE(service_->RemoveSmbGlobalMapping(remote).ok());
  EXPECT_TRUE(IsMounted(mount_point));
  EXPECT_NE(Log().find("the mapping of //127.0.0.1/" + server->share_name() +
                       " stays: it is still used by 1 local_path link"),
            std::string::npos)
      << Log();
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(local)));  // upstream leaves the link

  fs::remove(local);  // the link goes (a Rmdir of the filesystem group, which also unmaps; here only the link)
  ASSERT_TRUE(service_->RemoveSmbGlobalMapping(remote).ok());
  EXPECT_FALSE(IsMounted(mount_point));
  EXPECT_TRUE(testing::ListTree(mount_root_).empty());
  EXPECT_TRUE(service_->RemoveSmbGlobalMapping(remote).ok());
}

TEST_F(SmbServiceTest, WrongPasswordIsPermissionDeniedAndLeavesNothing) {
  REAL_MOUNT_PRECONDITIONS(server);
  MakeService("", false, true, server->port());
  auto status =
      service_->NewSmbGlobalMapping("//127.0.0.1/" + server->share_name(), "", server->username(), "wrong-password");
  EXPECT_EQ(status.code(), Code::kPermissionDenied) << status.message();
  EXPECT_TRUE(testing::ListTree(mount_root_).empty());
}

TEST_F(SmbServiceTest, AMappingWhoseServerWentAwayIsRemovedOnTheNextMapping) {
  REAL_MOUNT_PRECONDITIONS(server);
  MakeService("", false, true, server->port());
  const std::string remote = "//127.0.0.1/" + server->share_name();
  ASSERT_TRUE(service_->NewSmbGlobalMapping(remote, "", server->username(), server->password()).ok());
  const std::string mount_point = mount_root_ + "/127.0.0.1/" + server->share_name();
  const std::string user = server->username(), password = server->password();
  server.reset();  // the share becomes unreachable
  auto status = service_->NewSmbGlobalMapping(remote, "", user, password);
  EXPECT_FALSE(status.ok());  // the remount cannot reach the server either
  EXPECT_FALSE(IsMounted(mount_point));
  EXPECT_TRUE(testing::ListTree(mount_root_).empty());
}

}  // namespace
}  // namespace csi_proxy::smb

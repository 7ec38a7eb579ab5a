// The filesystem group's service layer on real directory trees and real mounts: upstream's behaviour where it
// is sensible, and that no request (string tricks, `..`, planted symlinks, mounts below) changes or reveals
// anything outside the allowed roots.
#include "filesystem_service.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <atomic>
#include <fstream>
#include <thread>
#include <vector>

#include "file_tree.h"
#include "smb_mapping_users_linux.h"
#include "temp_dir.h"
#include "volume_mounts_linux.h"

namespace csi_proxy::filesystem {
namespace {

using ::testing::HasSubstr;
using testing::IsDirNoFollow;
using testing::IsLinkNoFollow;
using testing::Lexists;
using testing::ReadFile;
using testing::Snapshot;
using testing::TempDir;
using testing::TestMount;
using testing::WriteFile;
namespace fs = std::filesystem;

// sandbox/kubelet and sandbox/work are the allowed roots; sandbox/kubelet-evil and sandbox/outside are not;
// sandbox/smb-mounts is a link target dir.
class FilesystemServiceTest : public ::testing::Test {
 protected:
  FilesystemServiceTest() : service_(MakeFilesystemBackend(MakePolicy(), {}), MakePolicy()) {
    fs::create_directories(kubelet_);
    fs::create_directories(work_);
    fs::create_directories(evil_);
    WriteFile(outside_ + "/secret.txt", "top secret");
    WriteFile(outside_ + "/dir/inner.txt", "inner");
    WriteFile(evil_ + "/victim.txt", "victim");
  }

  common::PathPolicy MakePolicy() {
    auto p = common::PathPolicy::Create(kubelet_, {work_}, {smb_});
    EXPECT_TRUE(p.ok());
    return *p;
  }

  // Everything that is not an allowed root, to compare before and after an attempted escape.
  std::map<std::string, std::string> OutsideState() {
    auto a = Snapshot(outside_);
    for (auto& [k, v] : Snapshot(evil_)) a["evil/" + k] = v;
    return a;
  }

  TempDir sandbox_;
  std::string kubelet_ = sandbox_.Sub("kubelet");
  std::string work_ = sandbox_.Sub("work");
  std::string evil_ = sandbox_.Sub("kubelet-evil");
  std::string outside_ = sandbox_.Sub("outside");
  std::string smb_ = sandbox_.Sub("smb-mounts");  // a link target dir, as the SMB group's mount root
  FilesystemService service_;
};

// ---- upstream's integration sequence and per-method behaviour ----

TEST_F(FilesystemServiceTest, UpstreamSequenceLinksPodVolumeToStageAndForcedRmdirKeepsTheStage) {
  const std::string stage = kubelet_ + "/testdir/testplugin-1.csi.io/volume1";
  const std::string pod = kubelet_ + "/testdir/test-pod-id/volumes/kubernetes.io~csi/pvc-test1";
  ASSERT_TRUE(service_.Mkdir(stage).ok());
  EXPECT_TRUE(*service_.PathExists(stage));
  ASSERT_TRUE(service_.Mkdir(pod).ok());
  EXPECT_TRUE(*service_.PathExists(pod));
  WriteFile(stage + "/data.txt", "volume data");

  ASSERT_TRUE(service_.CreateSymlink(stage, pod + "/rootvol").ok());
  EXPECT_TRUE(*service_.PathExists(pod + "/rootvol"));
  EXPECT_TRUE(*service_.IsSymlink(pod + "/rootvol"));
  EXPECT_EQ(fs::read_symlink(pod + "/rootvol").string(), stage);

  ASSERT_TRUE(service_.Rmdir(pod, /*force=*/true).ok());
  EXPECT_FALSE(*service_.PathExists(pod));
  EXPECT_EQ(ReadFile(stage + "/data.txt"), "volume data");

  ASSERT_TRUE(service_.Rmdir(stage, true).ok());
  EXPECT_FALSE(*service_.PathExists(stage));
}

TEST_F(FilesystemServiceTest, PathExistsCountsADanglingSymlink) {
  fs::create_symlink(kubelet_ + "/gone", kubelet_ + "/dangling");
  EXPECT_TRUE(*service_.PathExists(kubelet_ + "/dangling"));
}

TEST_F(FilesystemServiceTest, PathExistsOfMissingPathsIsFalse) {
  WriteFile(kubelet_ + "/file", "x");
  EXPECT_FALSE(*service_.PathExists(kubelet_ + "/missing"));
  EXPECT_FALSE(*service_.PathExists(kubelet_ + "/missing/deeper"));
  EXPECT_FALSE(*service_.PathExists(kubelet_ + "/file/below-a-file"));
  EXPECT_TRUE(*service_.PathExists(kubelet_));
}

TEST_F(FilesystemServiceTest, MkdirCreatesParentsAndSucceedsWhenTheDirectoryExists) {
  ASSERT_TRUE(service_.Mkdir(kubelet_ + "/a/b/c").ok());
  EXPECT_TRUE(IsDirNoFollow(kubelet_ + "/a/b/c"));
  EXPECT_TRUE(service_.Mkdir(kubelet_ + "/a/b/c").ok());
  EXPECT_TRUE(service_.Mkdir(kubelet_).ok());
}

TEST_F(FilesystemServiceTest, MkdirOverAFileFails) {
  WriteFile(kubelet_ + "/file", "x");
  auto s = service_.Mkdir(kubelet_ + "/file");
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("not a directory"));
  EXPECT_EQ(ReadFile(kubelet_ + "/file"), "x");
}

TEST_F(FilesystemServiceTest, MkdirThroughASymlinkIntoAnotherRootCreatesThere) {
  fs::create_directories(work_ + "/target");
  fs::create_symlink(work_ + "/target", kubelet_ + "/to-work");
  ASSERT_TRUE(service_.Mkdir(kubelet_ + "/to-work/sub").ok());
  EXPECT_TRUE(IsDirNoFollow(work_ + "/target/sub"));
}

TEST_F(FilesystemServiceTest, RmdirWithoutForceRemovesAnEmptyDirectory) {
  fs::create_directories(kubelet_ + "/empty");
  ASSERT_TRUE(service_.Rmdir(kubelet_ + "/empty", false).ok());
  EXPECT_FALSE(Lexists(kubelet_ + "/empty"));
}

TEST_F(FilesystemServiceTest, RmdirWithoutForceOfANonEmptyDirectoryFailsAndKeepsIt) {
  WriteFile(kubelet_ + "/full/f", "x");
  auto s = service_.Rmdir(kubelet_ + "/full", false);
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("not empty"));
  EXPECT_EQ(ReadFile(kubelet_ + "/full/f"), "x");
}

TEST_F(FilesystemServiceTest, RmdirOfAMissingPathFailsWithoutForceAndSucceedsWithForce) {
  EXPECT_EQ(service_.Rmdir(kubelet_ + "/missing", false).code(), Code::kNotFound);
  EXPECT_TRUE(service_.Rmdir(kubelet_ + "/missing", true).ok());
  EXPECT_TRUE(service_.Rmdir(kubelet_ + "/missing/deeper/still", true).ok());
}

TEST_F(FilesystemServiceTest, RmdirRemovesAFile) {
  WriteFile(kubelet_ + "/file", "x");
  ASSERT_TRUE(service_.Rmdir(kubelet_ + "/file", false).ok());
  EXPECT_FALSE(Lexists(kubelet_ + "/file"));
}

TEST_F(FilesystemServiceTest, RmdirOfAnAllowedRootIsRefused) {
  WriteFile(kubelet_ + "/keep", "x");
  for (bool force : {false, true}) {
    auto s = service_.Rmdir(kubelet_, force);
    EXPECT_EQ(s.code(), Code::kPermissionDenied);
    EXPECT_THAT(s.message(), HasSubstr("allowed root"));
  }
  EXPECT_EQ(ReadFile(kubelet_ + "/keep"), "x");
}

TEST_F(FilesystemServiceTest, ForcedRmdirRemovesSymlinksWithoutTouchingTheirTargets) {
  fs::create_directories(kubelet_ + "/stage");
  WriteFile(kubelet_ + "/stage/data", "d");
  WriteFile(kubelet_ + "/pod/file", "f");
  fs::create_directories(kubelet_ + "/pod/sub");
  fs::create_symlink(kubelet_ + "/stage", kubelet_ + "/pod/link-in");
  fs::create_symlink(outside_ + "/dir", kubelet_ + "/pod/link-out");
  fs::create_symlink(outside_ + "/secret.txt", kubelet_ + "/pod/sub/file-link");
  auto before = OutsideState();
  ASSERT_TRUE(service_.Rmdir(kubelet_ + "/pod", true).ok());
  EXPECT_FALSE(Lexists(kubelet_ + "/pod"));
  EXPECT_EQ(ReadFile(kubelet_ + "/stage/data"), "d");
  EXPECT_EQ(OutsideState(), before);
}

TEST_F(FilesystemServiceTest, CreateSymlinkFailsWhenTheLinkExists) {
  fs::create_directories(kubelet_ + "/stage");
  fs::create_directories(kubelet_ + "/pod/existing");
  auto s = service_.CreateSymlink(kubelet_ + "/stage", kubelet_ + "/pod/existing");
  EXPECT_EQ(s.code(), Code::kAlreadyExists);
  EXPECT_TRUE(IsDirNoFollow(kubelet_ + "/pod/existing"));
  ASSERT_TRUE(service_.CreateSymlink(kubelet_ + "/stage", kubelet_ + "/pod/link").ok());
  EXPECT_EQ(service_.CreateSymlink(kubelet_ + "/stage", kubelet_ + "/pod/link").code(), Code::kAlreadyExists);
}

TEST_F(FilesystemServiceTest, CreateSymlinkNeedsTheLinksParent) {
  auto s = service_.CreateSymlink(kubelet_, kubelet_ + "/no/such/parent/link");
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("parent"));
}

TEST_F(FilesystemServiceTest, CreateSymlinkAcceptsASourceThatDoesNotExistYet) {
  ASSERT_TRUE(service_.CreateSymlink(kubelet_ + "/later", kubelet_ + "/link").ok());
  EXPECT_EQ(fs::read_symlink(kubelet_ + "/link").string(), kubelet_ + "/later");
}

TEST_F(FilesystemServiceTest, CreateSymlinkWritesTheNormalizedSourceText) {
  fs::create_directories(kubelet_ + "/stage");
  ASSERT_TRUE(service_.CreateSymlink(kubelet_ + "//stage/./", kubelet_ + "/link").ok());
  EXPECT_EQ(fs::read_symlink(kubelet_ + "/link").string(), kubelet_ + "/stage");
}

TEST_F(FilesystemServiceTest, CreateSymlinkAcrossRootsWorksInBothDirections) {
  fs::create_directories(work_ + "/w");
  fs::create_directories(kubelet_ + "/k");
  EXPECT_TRUE(service_.CreateSymlink(work_ + "/w", kubelet_ + "/k/to-work").ok());
  EXPECT_TRUE(service_.CreateSymlink(kubelet_ + "/k", work_ + "/to-kubelet").ok());
  EXPECT_TRUE(*service_.IsSymlink(kubelet_ + "/k/to-work"));
  EXPECT_TRUE(*service_.IsSymlink(work_ + "/to-kubelet"));
}

// ---- IsSymlink, every case upstream tests and the Linux mount-point case ----

TEST_F(FilesystemServiceTest, IsSymlinkOfAMissingPathIsNotFound) {
  auto r = service_.IsSymlink(kubelet_ + "/missing");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
}

TEST_F(FilesystemServiceTest, IsSymlinkOfAPlainDirectoryOrFileIsFalse) {
  fs::create_directories(kubelet_ + "/dir");
  WriteFile(kubelet_ + "/file", "x");
  EXPECT_FALSE(*service_.IsSymlink(kubelet_ + "/dir"));
  EXPECT_FALSE(*service_.IsSymlink(kubelet_ + "/file"));
}

TEST_F(FilesystemServiceTest, IsSymlinkOfALinkToAnExistingDirectoryIsTrueUntilTheTargetIsDeleted) {
  fs::create_directories(kubelet_ + "/target");
  ASSERT_TRUE(service_.CreateSymlink(kubelet_ + "/target", kubelet_ + "/link").ok());
  EXPECT_TRUE(*service_.IsSymlink(kubelet_ + "/link"));
  fs::remove(kubelet_ + "/target");
  EXPECT_FALSE(*service_.IsSymlink(kubelet_ + "/link"));
}

TEST_F(FilesystemServiceTest, IsSymlinkOfASymlinkLoopIsFalse) {
  fs::create_symlink(kubelet_ + "/b", kubelet_ + "/a");
  fs::create_symlink(kubelet_ + "/a", kubelet_ + "/b");
  EXPECT_FALSE(*service_.IsSymlink(kubelet_ + "/a"));
}

TEST_F(FilesystemServiceTest, IsSymlinkOfAMountPointIsTrue) {
  fs::create_directories(kubelet_ + "/mnt");
  auto mount = TestMount::Tmpfs(kubelet_ + "/mnt");
  if (!mount.ok()) GTEST_SKIP() << mount.error();
  EXPECT_TRUE(*service_.IsSymlink(kubelet_ + "/mnt"));
}

TEST_F(FilesystemServiceTest, IsSymlinkOfALinkLeadingOutsideIsRefusedWhetherOrNotTheTargetExists) {
  fs::create_symlink(outside_ + "/secret.txt", kubelet_ + "/to-secret");
  fs::create_symlink(outside_ + "/nothing", kubelet_ + "/to-nothing");
  auto a = service_.IsSymlink(kubelet_ + "/to-secret");
  auto b = service_.IsSymlink(kubelet_ + "/to-nothing");
  ASSERT_FALSE(a.ok());
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(a.status().code(), Code::kPermissionDenied);
  EXPECT_EQ(b.status().code(), Code::kPermissionDenied);
}

// ---- RmdirContents (v2alpha1) ----

TEST_F(FilesystemServiceTest, RmdirContentsEmptiesTheTreeAndKeepsTheDirectory) {
  WriteFile(kubelet_ + "/tree/a/b/c.txt", "c");
  WriteFile(kubelet_ + "/tree/d.txt", "d");
  fs::create_directories(kubelet_ + "/tree/e/f");
  ASSERT_TRUE(service_.RmdirContents(kubelet_ + "/tree").ok());
  EXPECT_TRUE(IsDirNoFollow(kubelet_ + "/tree"));
  EXPECT_TRUE(fs::is_empty(kubelet_ + "/tree"));
}

TEST_F(FilesystemServiceTest, RmdirContentsRemovesALinkToAnOutsideFileButNotTheFile) {
  fs::create_directories(kubelet_ + "/tree");
  fs::create_symlink(outside_ + "/secret.txt", kubelet_ + "/tree/link");
  fs::create_symlink(outside_ + "/dir", kubelet_ + "/tree/dirlink");
  auto before = OutsideState();
  ASSERT_TRUE(service_.RmdirContents(kubelet_ + "/tree").ok());
  EXPECT_TRUE(fs::is_empty(kubelet_ + "/tree"));
  EXPECT_EQ(OutsideState(), before);
}

TEST_F(FilesystemServiceTest, RmdirContentsOfAMissingPathOrAFileFails) {
  WriteFile(kubelet_ + "/file", "x");
  EXPECT_EQ(service_.RmdirContents(kubelet_ + "/missing").code(), Code::kNotFound);
  EXPECT_EQ(service_.RmdirContents(kubelet_ + "/file").code(), Code::kFailedPrecondition);
  EXPECT_EQ(ReadFile(kubelet_ + "/file"), "x");
}

// ---- escapes: nothing outside the roots changes, nothing about it is revealed ----

TEST_F(FilesystemServiceTest, StringPrefixSiblingIsRefusedByEveryMethod) {
  auto before = OutsideState();
  const std::string victim = evil_ + "/victim.txt";
  std::vector<Status> results = {
      service_.PathExists(victim).status(),
      service_.Mkdir(evil_ + "/new"),
      service_.Rmdir(victim, false),
      service_.Rmdir(evil_, true),
      service_.RmdirContents(evil_),
      service_.IsSymlink(victim).status(),
      service_.CreateSymlink(victim, kubelet_ + "/link"),
      service_.CreateSymlink(kubelet_, evil_ + "/link"),
  };
  for (const Status& s : results) {
    EXPECT_EQ(s.code(), Code::kPermissionDenied) << s.message();
    EXPECT_THAT(s.message(), HasSubstr("kubelet-evil"));
    EXPECT_THAT(s.message(), HasSubstr(service_.policy().RootsForMessage()));
  }
  EXPECT_EQ(OutsideState(), before);
  EXPECT_FALSE(Lexists(kubelet_ + "/link"));
}

TEST_F(FilesystemServiceTest, DotDotEmptyRelativeAndNulPathsAreInvalidForEveryMethod) {
  auto before = OutsideState();
  std::string nul = kubelet_ + "/a";
  nul.push_back('\0');
  for (const std::string& p : {kubelet_ + "/../outside/secret.txt", kubelet_ + "/../kubelet-evil", std::string(),
                               std::string("relative/path"), nul}) {
    std::vector<Status> results = {
        service_.PathExists(p).status(),
        service_.Mkdir(p),
        service_.Rmdir(p, true),
        service_.RmdirContents(p),
        service_.IsSymlink(p).status(),
        service_.CreateSymlink(p, kubelet_ + "/link"),
        service_.CreateSymlink(kubelet_, p),
    };
    for (const Status& s : results) EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.message();
  }
  EXPECT_EQ(OutsideState(), before);
}

TEST_F(FilesystemServiceTest, SymlinkInTheMiddlePointingOutsideLetsNoMethodThrough) {
  fs::create_symlink(outside_, kubelet_ + "/evil");
  auto before = OutsideState();
  std::vector<Status> results = {
      service_.PathExists(kubelet_ + "/evil/secret.txt").status(),
      service_.PathExists(kubelet_ + "/evil/no-such-file").status(),
      service_.Mkdir(kubelet_ + "/evil/new/dir"),
      service_.Rmdir(kubelet_ + "/evil/secret.txt", false),
      service_.Rmdir(kubelet_ + "/evil/dir", true),
      service_.RmdirContents(kubelet_ + "/evil/dir"),
      service_.IsSymlink(kubelet_ + "/evil/dir").status(),
      service_.CreateSymlink(kubelet_, kubelet_ + "/evil/planted"),
      service_.CreateSymlink(kubelet_ + "/evil/secret.txt", kubelet_ + "/link-via-evil"),
  };
  for (const Status& s : results) EXPECT_EQ(s.code(), Code::kPermissionDenied) << s.message();
  EXPECT_EQ(OutsideState(), before);
  EXPECT_FALSE(Lexists(kubelet_ + "/link-via-evil"));
}

TEST_F(FilesystemServiceTest, RelativeSymlinkClimbingOutLetsNoMethodThrough) {
  fs::create_directories(kubelet_ + "/pods");
  fs::create_symlink("../../outside", kubelet_ + "/pods/up");
  auto before = OutsideState();
  std::vector<Status> results = {
      service_.PathExists(kubelet_ + "/pods/up/secret.txt").status(),
      service_.Mkdir(kubelet_ + "/pods/up/new"),
      service_.Rmdir(kubelet_ + "/pods/up/dir", true),
      service_.RmdirContents(kubelet_ + "/pods/up"),
      service_.CreateSymlink(kubelet_, kubelet_ + "/pods/up/planted"),
  };
  for (const Status& s : results) EXPECT_EQ(s.code(), Code::kPermissionDenied) << s.message();
  EXPECT_EQ(OutsideState(), before);
}

TEST_F(FilesystemServiceTest, SymlinkAsTheLastComponentIsActedOnNeverFollowedOutside) {
  fs::create_symlink(outside_ + "/dir", kubelet_ + "/last");
  auto before = OutsideState();

  EXPECT_TRUE(*service_.PathExists(kubelet_ + "/last"));  // the link itself exists; nothing else is said
  EXPECT_EQ(service_.Mkdir(kubelet_ + "/last").code(), Code::kPermissionDenied);
  EXPECT_EQ(service_.RmdirContents(kubelet_ + "/last").code(), Code::kPermissionDenied);
  EXPECT_EQ(service_.CreateSymlink(kubelet_, kubelet_ + "/last").code(), Code::kAlreadyExists);
  EXPECT_EQ(OutsideState(), before);

  ASSERT_TRUE(service_.Rmdir(kubelet_ + "/last", /*force=*/true).ok());
  EXPECT_FALSE(Lexists(kubelet_ + "/last"));
  fs::create_symlink(outside_ + "/dir", kubelet_ + "/last");
  ASSERT_TRUE(service_.Rmdir(kubelet_ + "/last", /*force=*/false).ok());
  EXPECT_FALSE(Lexists(kubelet_ + "/last"));
  EXPECT_EQ(OutsideState(), before);
}

TEST_F(FilesystemServiceTest, CreateSymlinkRefusesASourceThatLeadsOutsideThroughAFinalLink) {
  fs::create_symlink(outside_ + "/secret.txt", kubelet_ + "/hop");
  auto s = service_.CreateSymlink(kubelet_ + "/hop", kubelet_ + "/link");
  EXPECT_EQ(s.code(), Code::kPermissionDenied);
  EXPECT_THAT(s.message(), HasSubstr("source_path"));
  EXPECT_FALSE(Lexists(kubelet_ + "/link"));
}

// ---- link target dirs: SMB-staged paths can be examined and linked to, never changed through ----

TEST_F(FilesystemServiceTest, SmbStagedPathCanBeCheckedAndPublishedButNotChangedThroughTheLink) {
  WriteFile(smb_ + "/server/share/file.txt", "remote data");
  const std::string staging = kubelet_ + "/plugins/smb.csi.k8s.io/staging/pv1";
  const std::string publish = kubelet_ + "/pods/p1/volumes/kubernetes.io~csi/pv1/mount";
  fs::create_directories(fs::path(staging).parent_path());
  fs::create_directories(fs::path(publish).parent_path());
  fs::create_symlink(smb_ + "/server/share", staging);  // what NewSmbGlobalMapping's local_path does
  auto share_before = Snapshot(smb_);

  EXPECT_TRUE(*service_.IsSymlink(staging));
  ASSERT_TRUE(service_.CreateSymlink(staging, publish).ok());
  EXPECT_TRUE(*service_.IsSymlink(publish));
  EXPECT_TRUE(*service_.PathExists(publish + "/file.txt"));

  EXPECT_EQ(service_.Mkdir(publish + "/new").code(), Code::kPermissionDenied);
  EXPECT_EQ(service_.RmdirContents(staging).code(), Code::kPermissionDenied);
  EXPECT_EQ(service_.Rmdir(publish + "/file.txt", true).code(), Code::kPermissionDenied);
  EXPECT_EQ(service_.CreateSymlink(kubelet_, staging + "/planted").code(), Code::kPermissionDenied);
  EXPECT_EQ(service_.PathExists(smb_ + "/server/share").status().code(), Code::kPermissionDenied);

  ASSERT_TRUE(service_.Rmdir(publish, true).ok());
  ASSERT_TRUE(service_.Rmdir(staging, false).ok());
  EXPECT_FALSE(Lexists(publish));
  EXPECT_FALSE(Lexists(staging));
  EXPECT_EQ(Snapshot(smb_), share_before);
}

// ---- mounts below a removed directory are never entered ----

class FilesystemServiceMountTest : public FilesystemServiceTest {
 protected:
  // A pod directory with a volume still mounted (a real tmpfs holding data) and ordinary content beside it.
  void SetUp() override {
    fs::create_directories(mount_point_);
    WriteFile(pod_ + "/plugins/state.json", "{}");
    WriteFile(pod_ + "/etc-hosts", "127.0.0.1");
    volume_.emplace(TestMount::Tmpfs(mount_point_));
    if (!volume_->ok()) GTEST_SKIP() << volume_->error();
    WriteFile(mount_point_ + "/volume-data.txt", "precious");
    fs::create_directories(mount_point_ + "/nested/dir");
  }
  void TearDown() override { volume_.reset(); }

  std::string pod_ = kubelet_ + "/pods/pod-1";
  std::string mount_point_ = pod_ + "/volumes/kubernetes.io~csi/pvc-1/mount";
  std::optional<TestMount> volume_;
};

TEST_F(FilesystemServiceMountTest, ForcedRmdirLeavesAMountedVolumeAndSaysSo) {
  auto volume_before = Snapshot(mount_point_);
  auto s = service_.Rmdir(pod_, true);
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("not removed: \"" + mount_point_ + "\" is a mount point"));
  EXPECT_EQ(Snapshot(mount_point_), volume_before);
  EXPECT_FALSE(Lexists(pod_ + "/plugins"));  // everything that could go, went
  EXPECT_FALSE(Lexists(pod_ + "/etc-hosts"));
}

TEST_F(FilesystemServiceMountTest, RmdirContentsLeavesAMountedVolumeAndSaysSo) {
  auto volume_before = Snapshot(mount_point_);
  auto s = service_.RmdirContents(pod_);
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr(mount_point_));
  EXPECT_EQ(Snapshot(mount_point_), volume_before);
  EXPECT_FALSE(Lexists(pod_ + "/etc-hosts"));
}

TEST_F(FilesystemServiceMountTest, ForcedRmdirOfTheMountPointItselfTouchesNothing) {
  auto volume_before = Snapshot(mount_point_);
  auto s = service_.Rmdir(mount_point_, true);
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("is a mount point"));
  EXPECT_EQ(Snapshot(mount_point_), volume_before);
}

TEST_F(FilesystemServiceMountTest, RmdirWithoutForceOfTheMountPointFails) {
  EXPECT_EQ(service_.Rmdir(mount_point_, false).code(), Code::kFailedPrecondition);
  EXPECT_EQ(ReadFile(mount_point_ + "/volume-data.txt"), "precious");
}

TEST_F(FilesystemServiceMountTest, BindMountOfTheSameFilesystemIsNotEnteredEither) {
  // A bind mount has the same st_dev as its parent directory; the walk must still see the mount.
  fs::create_directories(pod_ + "/bind");
  auto bind = TestMount::Bind(outside_ + "/dir", pod_ + "/bind");
  if (!bind.ok()) GTEST_SKIP() << bind.error();
  auto before = OutsideState();
  auto s = service_.Rmdir(pod_, true);
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr(pod_ + "/bind"));
  EXPECT_EQ(OutsideState(), before);
}

// ---- issue 22: a forced Rmdir removes a mount point MountVolume made, as Windows removes a volume mount point ----

class FilesystemServiceRecordedMountTest : public FilesystemServiceMountTest {
 protected:
  // The volume group's record of a mount point MountVolume made (plugins/common/volume_mounts_linux.h), written
  // here for the test's tmpfs, as the volume group writes it for a volume: the mount point and its device.
  void RecordAsMountVolumes(const std::string& mount_point) {
    struct stat st {};
    ASSERT_EQ(stat(mount_point.c_str(), &st), 0);
    common::BlockDevice device;
    device.path = "csi-proxy-test";  // the tmpfs's source
    device.devno = st.st_dev;
    ASSERT_TRUE(common::VolumeMounts(state_.path()).Record(mount_point, device).ok());
  }
  static bool IsMountPoint(const std::string& path) {
    struct statx stx {};
    return statx(AT_FDCWD, path.c_str(), AT_SYMLINK_NOFOLLOW, 0, &stx) == 0 &&
           (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
  }

  TempDir state_;
  FilesystemService with_records_{MakeFilesystemBackend(MakePolicy(), FilesystemOptions{.state_dir = state_.path()}),
                                  MakePolicy()};
};

TEST_F(FilesystemServiceRecordedMountTest, ForcedRmdirOfAMountPointMountVolumeMadeUnmountsAndRemovesIt) {
  RecordAsMountVolumes(mount_point_);
  auto s = with_records_.Rmdir(mount_point_, true);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_FALSE(Lexists(mount_point_));
  EXPECT_FALSE(IsMountPoint(mount_point_));
  EXPECT_FALSE(common::VolumeMounts(state_.path()).MadeByMountVolume(common::MountEntry{}).value());
}

TEST_F(FilesystemServiceRecordedMountTest, ForcedRmdirOfAPodDirectoryUnmountsTheMountVolumeMountsBelowIt) {
  RecordAsMountVolumes(mount_point_);
  ASSERT_TRUE(with_records_.Rmdir(pod_, true).ok());
  EXPECT_FALSE(Lexists(pod_));
}

TEST_F(FilesystemServiceRecordedMountTest, AnyOtherMountStaysRefused) {
  // The record names another device: whatever is mounted there now is not what MountVolume mounted.
  common::BlockDevice other;
  other.path = "/dev/other";
  other.devno = makedev(240, 4242);
  ASSERT_TRUE(common::VolumeMounts(state_.path()).Record(mount_point_, other).ok());
  auto volume_before = Snapshot(mount_point_);
  auto s = with_records_.Rmdir(mount_point_, true);
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("is a mount point"));
  EXPECT_EQ(Snapshot(mount_point_), volume_before);
  // Without the volume group's records (no state_dir) nothing is recognised at all.
  RecordAsMountVolumes(mount_point_);
  EXPECT_EQ(service_.Rmdir(mount_point_, true).code(), Code::kFailedPrecondition);
  EXPECT_TRUE(IsMountPoint(mount_point_));
}

TEST_F(FilesystemServiceRecordedMountTest, AMountVolumeMountWithOpenFilesStaysAndTheCallSaysItIsBusy) {
  RecordAsMountVolumes(mount_point_);
  std::ifstream open_file(mount_point_ + "/volume-data.txt");
  auto s = with_records_.Rmdir(mount_point_, true);
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("busy"));
  EXPECT_EQ(ReadFile(mount_point_ + "/volume-data.txt"), "precious");
}

TEST_F(FilesystemServiceMountTest, ForcedRmdirSucceedsOnceTheVolumeIsUnmounted) {
  volume_.reset();
  ASSERT_TRUE(service_.Rmdir(pod_, true).ok());
  EXPECT_FALSE(Lexists(pod_));
}

// ---- issue 22: removing the last local_path link of an SMB mapping unmaps it ----

// The SMB group's records of two local_path links to one mapping (plugins/common/smb_mapping_users_linux.h),
// written here as the SMB group writes them. The mapping's mount point is an empty directory with nothing mounted:
// this machine has no cifs (the real mounts run in the VM lane); unmapping one that is not mounted removes it.
class FilesystemServiceSmbLinkTest : public FilesystemServiceTest {
 protected:
  void SetUp() override {
    fs::create_directories(mount_point_);
    fs::create_directories(kubelet_ + "/stage");
    common::SmbMappingUsers users(state_.path(), MakePolicy());
    for (const std::string pvc : {"pvc-1", "pvc-2"}) {
      fs::create_directory_symlink(mount_point_ + "/" + pvc, kubelet_ + "/stage/" + pvc);
      ASSERT_TRUE(
          users.AddLink(kubelet_ + "/stage/" + pvc, mount_point_ + "/" + pvc, {"//server/share", mount_point_}).ok());
    }
  }

  TempDir state_;
  std::string mount_point_ = smb_ + "/server/share";
  FilesystemService with_records_{MakeFilesystemBackend(MakePolicy(), FilesystemOptions{.state_dir = state_.path()}),
                                  MakePolicy()};
};

TEST_F(FilesystemServiceSmbLinkTest, RemovingOneLinkKeepsTheMappingAndRemovingTheLastUnmapsIt) {
  ASSERT_TRUE(with_records_.Rmdir(kubelet_ + "/stage/pvc-1", true).ok());
  EXPECT_FALSE(Lexists(kubelet_ + "/stage/pvc-1"));
  EXPECT_TRUE(IsDirNoFollow(mount_point_)) << "pvc-2's link still uses the mapping";
  ASSERT_TRUE(with_records_.Rmdir(kubelet_ + "/stage/pvc-2", false).ok());
  EXPECT_FALSE(Lexists(mount_point_)) << "the last link is gone: the mapping is removed";
}

TEST_F(FilesystemServiceSmbLinkTest, RemovingATreeThatHoldsTheLinksUnmapsTheMapping) {
  ASSERT_TRUE(with_records_.Rmdir(kubelet_ + "/stage", true).ok());
  EXPECT_FALSE(Lexists(mount_point_));
}

TEST_F(FilesystemServiceSmbLinkTest, ALinkReplacedByAnythingElseNoLongerCounts) {
  fs::remove(kubelet_ + "/stage/pvc-2");
  fs::create_directory_symlink(kubelet_, kubelet_ + "/stage/pvc-2");  // another link now: not the mapping's user
  ASSERT_TRUE(with_records_.Rmdir(kubelet_ + "/stage/pvc-1", true).ok());
  EXPECT_FALSE(Lexists(mount_point_));
  EXPECT_TRUE(Lexists(kubelet_ + "/stage/pvc-2"));
}

// ---- locking ----

TEST_F(FilesystemServiceTest, ConcurrentMkdirAndForcedRmdirOfOnePathBothSucceed) {
  // Both are idempotent, so every call succeeds whatever the interleaving (per-path lock, retrying walks).
  const std::string path = kubelet_ + "/pods/p/volumes/v";
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        Status s = (t % 2 == 0) ? service_.Mkdir(path) : service_.Rmdir(path, true);
        if (!s.ok()) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace csi_proxy::filesystem

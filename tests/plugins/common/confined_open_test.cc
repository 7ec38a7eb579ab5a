// Opening request paths beneath the allowed roots (plugins/common/confined_open_linux.h), on real trees:
// which symlinks are followed, which are refused, and that nothing is created outside.
#include "confined_open_linux.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "file_tree.h"
#include "temp_dir.h"

namespace csi_proxy::common {
namespace {

using csi_proxy::testing::Lexists;
using csi_proxy::testing::Snapshot;
using csi_proxy::testing::TempDir;
using csi_proxy::testing::WriteFile;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

class ConfinedOpen : public ::testing::Test {
 protected:
  ConfinedOpen() {
    fs::create_directories(kubelet_ + "/stage/data");
    fs::create_directories(work_ + "/dir");
    WriteFile(outside_ + "/secret", "s");
    auto p = PathPolicy::Create(kubelet_, {work_});
    EXPECT_TRUE(p.ok());
    policy_ = *p;
  }

  ConfinedPath Confine(const std::string& path) {
    auto c = policy_.Confine(path);
    EXPECT_TRUE(c.ok()) << c.status().message();
    return *c;
  }

  // The inode the descriptor refers to equals the one at `expected` (followed).
  static bool SameFile(int fd, const std::string& expected) {
    struct stat a, b;
    return ::fstat(fd, &a) == 0 && ::stat(expected.c_str(), &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
  }

  TempDir sandbox_;
  std::string kubelet_ = sandbox_.Sub("kubelet");
  std::string work_ = sandbox_.Sub("work");
  std::string outside_ = sandbox_.Sub("outside");
  PathPolicy policy_;
};

TEST_F(ConfinedOpen, ParentOfAPlainPathIsItsDirectoryAndLastName) {
  auto p = OpenParent(policy_, Confine(kubelet_ + "/stage/data/file"), "path");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->name, "file");
  EXPECT_TRUE(SameFile(p->dir.get(), kubelet_ + "/stage/data"));
}

TEST_F(ConfinedOpen, ParentOfARootIsTheRootWithAnEmptyName) {
  auto p = OpenParent(policy_, Confine(kubelet_), "path");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->name.empty());
  EXPECT_TRUE(SameFile(p->dir.get(), kubelet_));
}

TEST_F(ConfinedOpen, TheLastComponentIsNotFollowed) {
  fs::create_symlink(outside_, kubelet_ + "/link-out");
  auto p = OpenParent(policy_, Confine(kubelet_ + "/link-out"), "path");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->name, "link-out");
  EXPECT_TRUE(SameFile(p->dir.get(), kubelet_));
}

TEST_F(ConfinedOpen, RelativeSymlinkStayingInsideIsFollowed) {
  fs::create_symlink("stage/data", kubelet_ + "/rel");
  auto fd = OpenFollowing(policy_, Confine(kubelet_ + "/rel"), "path");
  ASSERT_TRUE(fd.ok()) << fd.status().message();
  EXPECT_TRUE(SameFile(fd->get(), kubelet_ + "/stage/data"));
}

TEST_F(ConfinedOpen, RelativeSymlinkWithDotDotInsideTheRootIsFollowed) {
  fs::create_directories(kubelet_ + "/pods/p");
  fs::create_symlink("../../stage", kubelet_ + "/pods/p/vol");
  auto fd = OpenFollowing(policy_, Confine(kubelet_ + "/pods/p/vol/data"), "path");
  ASSERT_TRUE(fd.ok()) << fd.status().message();
  EXPECT_TRUE(SameFile(fd->get(), kubelet_ + "/stage/data"));
}

TEST_F(ConfinedOpen, AbsoluteSymlinkIntoAnotherRootIsFollowed) {
  fs::create_symlink(work_ + "/dir", kubelet_ + "/to-work");
  auto fd = OpenFollowing(policy_, Confine(kubelet_ + "/to-work"), "path");
  ASSERT_TRUE(fd.ok()) << fd.status().message();
  EXPECT_TRUE(SameFile(fd->get(), work_ + "/dir"));
}

TEST_F(ConfinedOpen, AbsoluteSymlinkOutsideTheRootsIsRefused) {
  fs::create_symlink(outside_, kubelet_ + "/evil");
  auto fd = OpenFollowing(policy_, Confine(kubelet_ + "/evil/secret"), "path");
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().code(), Code::kPermissionDenied);
  EXPECT_THAT(fd.status().message(), HasSubstr(kubelet_ + "/evil/secret"));
  EXPECT_THAT(fd.status().message(), HasSubstr(policy_.RootsForMessage()));
}

TEST_F(ConfinedOpen, RefusalDoesNotDependOnWhetherTheOutsideTargetExists) {
  fs::create_symlink(outside_, kubelet_ + "/evil");
  EXPECT_EQ(OpenFollowing(policy_, Confine(kubelet_ + "/evil/secret"), "path").status().code(),
            Code::kPermissionDenied);
  EXPECT_EQ(OpenFollowing(policy_, Confine(kubelet_ + "/evil/nothing-here"), "path").status().code(),
            Code::kPermissionDenied);
}

TEST_F(ConfinedOpen, RelativeSymlinkClimbingAboveTheRootIsRefused) {
  fs::create_symlink("../outside", kubelet_ + "/up");
  EXPECT_EQ(OpenFollowing(policy_, Confine(kubelet_ + "/up/secret"), "path").status().code(), Code::kPermissionDenied);
  EXPECT_EQ(OpenParent(policy_, Confine(kubelet_ + "/up/secret"), "path").status().code(), Code::kPermissionDenied);
}

TEST_F(ConfinedOpen, SymlinkToAStringPrefixSiblingIsRefused) {
  fs::create_directories(sandbox_.Sub("kubelet-evil"));
  fs::create_symlink(sandbox_.Sub("kubelet-evil"), kubelet_ + "/sib");
  EXPECT_EQ(OpenFollowing(policy_, Confine(kubelet_ + "/sib"), "path").status().code(), Code::kPermissionDenied);
}

TEST_F(ConfinedOpen, MagicLinkTextIsRefused) {
  // /proc/self/root is a "magic" link; its text ("/") is outside every root.
  fs::create_symlink("/proc/self/root", kubelet_ + "/magic");
  EXPECT_EQ(OpenFollowing(policy_, Confine(kubelet_ + "/magic/etc"), "path").status().code(), Code::kPermissionDenied);
}

TEST_F(ConfinedOpen, MissingComponentIsNotFound) {
  auto fd = OpenFollowing(policy_, Confine(kubelet_ + "/nope/x"), "path");
  EXPECT_EQ(fd.status().code(), Code::kNotFound);
  EXPECT_EQ(OpenParent(policy_, Confine(kubelet_ + "/nope/x"), "path").status().code(), Code::kNotFound);
}

TEST_F(ConfinedOpen, FileInTheMiddleIsNotFound) {
  WriteFile(kubelet_ + "/file", "x");
  EXPECT_EQ(OpenParent(policy_, Confine(kubelet_ + "/file/x"), "path").status().code(), Code::kNotFound);
}

TEST_F(ConfinedOpen, MissingRootIsNotFound) {
  auto p = PathPolicy::Create(sandbox_.Sub("absent-root"), {});
  ASSERT_TRUE(p.ok());
  auto c = p->Confine(sandbox_.Sub("absent-root/x"));
  ASSERT_TRUE(c.ok());
  auto r = OpenParent(*p, *c, "path");
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("allowed root"));
}

TEST_F(ConfinedOpen, SymlinkLoopIsFailedPrecondition) {
  fs::create_symlink("b", kubelet_ + "/a");
  fs::create_symlink("a", kubelet_ + "/b");
  EXPECT_EQ(OpenFollowing(policy_, Confine(kubelet_ + "/a"), "path").status().code(), Code::kFailedPrecondition);
}

TEST_F(ConfinedOpen, CreatingDirsMakesEveryMissingComponent) {
  auto fd = OpenCreatingDirs(policy_, Confine(kubelet_ + "/x/y/z"), "path");
  ASSERT_TRUE(fd.ok()) << fd.status().message();
  EXPECT_TRUE(fs::is_directory(kubelet_ + "/x/y/z"));
  EXPECT_TRUE(SameFile(fd->get(), kubelet_ + "/x/y/z"));
}

TEST_F(ConfinedOpen, CreatingDirsThroughALinkOutsideCreatesNothing) {
  fs::create_symlink(outside_, kubelet_ + "/evil");
  auto before = Snapshot(outside_);
  EXPECT_EQ(OpenCreatingDirs(policy_, Confine(kubelet_ + "/evil/new/deeper"), "path").status().code(),
            Code::kPermissionDenied);
  EXPECT_EQ(Snapshot(outside_), before);
}

TEST_F(ConfinedOpen, CreatingDirsDoesNotCreateTheTargetOfADanglingLink) {
  fs::create_symlink("stage/missing", kubelet_ + "/dangling");
  EXPECT_EQ(OpenCreatingDirs(policy_, Confine(kubelet_ + "/dangling/x"), "path").status().code(), Code::kNotFound);
  EXPECT_FALSE(Lexists(kubelet_ + "/stage/missing"));
}

TEST_F(ConfinedOpen, CreatingDirsOverAFileIsFailedPrecondition) {
  WriteFile(kubelet_ + "/file", "x");
  EXPECT_EQ(OpenCreatingDirs(policy_, Confine(kubelet_ + "/file"), "path").status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(OpenCreatingDirs(policy_, Confine(kubelet_ + "/file/sub"), "path").status().code(),
            Code::kFailedPrecondition);
}

TEST_F(ConfinedOpen, RacingSwapOfADirectoryAndAnOutsideLinkNeverCreatesOutside) {
  // Another process keeps exchanging a directory and a link to the outside (atomically, RENAME_EXCHANGE) while
  // paths through that name are created: every walk either lands in the directory or is refused.
  fs::create_directories(kubelet_ + "/swap");
  fs::create_symlink(outside_, kubelet_ + "/other");
  std::atomic<bool> stop{false};
  std::thread flipper([&] {
    while (!stop)
      ::renameat2(AT_FDCWD, (kubelet_ + "/swap").c_str(), AT_FDCWD, (kubelet_ + "/other").c_str(), RENAME_EXCHANGE);
  });
  int created = 0, refused = 0;
  for (int i = 0; i < 3000; ++i) {
    auto r = OpenCreatingDirs(policy_, Confine(kubelet_ + "/swap/made/" + std::to_string(i % 7)), "path");
    if (r.ok()) {
      ++created;
    } else {
      EXPECT_EQ(r.status().code(), Code::kPermissionDenied) << r.status().message();
      ++refused;
    }
  }
  stop = true;
  flipper.join();
  EXPECT_EQ(Snapshot(outside_), (std::map<std::string, std::string>{{".", "dir"}, {"secret", "file:s"}}));
  EXPECT_GT(created, 0);
  RecordProperty("refused", refused);
}

TEST_F(ConfinedOpen, LinkIntoALinkTargetDirIsFollowedForExaminingOnly) {
  fs::create_directories(sandbox_.Sub("smb/srv/share"));
  auto p = PathPolicy::Create(kubelet_, {work_}, {sandbox_.Sub("smb")});
  ASSERT_TRUE(p.ok());
  fs::create_symlink(sandbox_.Sub("smb/srv/share"), kubelet_ + "/staging");
  auto c = p->Confine(kubelet_ + "/staging");
  ASSERT_TRUE(c.ok());

  auto examined = OpenFollowing(*p, *c, "path", Access::kExamine);
  ASSERT_TRUE(examined.ok()) << examined.status().message();
  EXPECT_TRUE(SameFile(examined->get(), sandbox_.Sub("smb/srv/share")));
  EXPECT_EQ(OpenFollowing(*p, *c, "path", Access::kModify).status().code(), Code::kPermissionDenied);
  EXPECT_EQ(OpenFollowing(policy_, *c, "path", Access::kExamine).status().code(), Code::kPermissionDenied);
}

TEST_F(ConfinedOpen, DotDotCannotClimbOutOfALinkTargetDir) {
  fs::create_directories(sandbox_.Sub("smb/srv"));
  auto p = PathPolicy::Create(kubelet_, {}, {sandbox_.Sub("smb")});
  ASSERT_TRUE(p.ok());
  fs::create_symlink(sandbox_.Sub("smb/srv/../../outside"), kubelet_ + "/climb");
  auto c = p->Confine(kubelet_ + "/climb/secret");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(OpenFollowing(*p, *c, "path", Access::kExamine).status().code(), Code::kPermissionDenied);
}

}  // namespace
}  // namespace csi_proxy::common

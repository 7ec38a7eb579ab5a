// The trusted-file checks on real files: what a root host may take code and settings from, write its audit log
// to and keep state in, and that what is checked is what is read.
#include "config/trusted_files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "temp_dir.h"

namespace csi_proxy::host {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

TEST(TrustedFiles, AFileReachedThroughLinksInTrustedDirectoriesIsOpenedAndRead) {
  TempDir dir;
  dir.Write("etc/real.toml", "[host]\n");
  fs::create_directory_symlink("etc", dir.Sub("conf"));
  fs::create_symlink(dir.Sub("conf/real.toml"), dir.Sub("csi-proxy.toml"));
  auto file = OpenTrustedFile(dir.Sub("csi-proxy.toml"), "the configuration file");
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto text = file->ReadAll(1024);
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_EQ(*text, "[host]\n");
  // The open file is what is read, whatever the path names afterwards.
  fs::remove(dir.Sub("etc/real.toml"));
  dir.Write("etc/real.toml", "[groups.other]\n");
  EXPECT_EQ(*file->ReadAll(1024), "[host]\n");
}

TEST(TrustedFiles, ARelativePathIsWalkedThroughTheWorkingDirectory) {
  TempDir dir;
  dir.Write("etc/csi-proxy.toml", "[host]\n");
  const fs::path before = fs::current_path();
  fs::current_path(dir.path());
  auto file = OpenTrustedFile("etc/csi-proxy.toml", "the configuration file");
  fs::permissions(dir.Sub("etc"), fs::perms::all);
  auto open_dir = OpenTrustedFile("etc/csi-proxy.toml", "the configuration file");
  fs::current_path(before);
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(*file->ReadAll(1024), "[host]\n");
  EXPECT_NE(open_dir.status().message().find("lies in " + dir.Sub("etc") + ", which is writable"), std::string::npos)
      << open_dir.status().message();
}

TEST(TrustedFiles, ADirectoryOthersCanWriteToOnThePathIsRefusedByName) {
  TempDir dir;
  dir.Write("open/lib/libx.so", "x");
  fs::permissions(dir.Sub("open"), fs::perms::all);  // 0777, no sticky bit
  auto file = OpenTrustedFile(dir.Sub("open/lib/libx.so"), "the library");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), Code::kPermissionDenied);
  EXPECT_NE(file.status().message().find("lies in " + dir.Sub("open") +
                                         ", which is writable by its group or by "
                                         "others (mode 0777)"),
            std::string::npos)
      << file.status().message();
}

TEST(TrustedFiles, ALinkOnThePathIsJudgedByWhereItLeads) {
  TempDir dir;
  dir.Write("open/libx.so", "x");
  fs::permissions(dir.Sub("open"), fs::perms::all);
  fs::create_directory_symlink(dir.Sub("open"), dir.Sub("plugins"));  // in a trusted directory, to an open one
  auto file = OpenTrustedFile(dir.Sub("plugins/libx.so"), "the library");
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.status().message().find("lies in " + dir.Sub("open") + ", which"), std::string::npos)
      << file.status().message();
}

TEST(TrustedFiles, ARootStickyDirectoryIsTrustedButItsOtherUsersEntriesAreNot) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: the sticky exception holds for root's directories only";
  TempDir dir;
  dir.Write("shared/mine.toml", "x");
  fs::permissions(dir.Sub("shared"), fs::perms::all | fs::perms::sticky_bit);  // as /tmp
  EXPECT_TRUE(OpenTrustedFile(dir.Sub("shared/mine.toml"), "the configuration file").ok());
  dir.Write("shared/theirs.toml", "x");
  ASSERT_EQ(chown(dir.Sub("shared/theirs.toml").c_str(), 65534, 65534), 0);
  auto theirs = OpenTrustedFile(dir.Sub("shared/theirs.toml"), "the configuration file");
  ASSERT_FALSE(theirs.ok());
  EXPECT_NE(theirs.status().message().find(dir.Sub("shared/theirs.toml") + " is owned by uid 65534"), std::string::npos)
      << theirs.status().message();
}

// A Kubernetes ConfigMap volume: a directory of mode 0777, mounted read-only into the container. Nobody writes on a
// read-only mount, whatever the modes say.
TEST(TrustedFiles, AnOpenDirectoryOnAReadOnlyMountIsTrusted) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to bind-mount";
  TempDir dir;
  dir.Write("volume/..data/csi-proxy.toml", "[host]\n");
  fs::permissions(dir.Sub("volume"), fs::perms::all);
  fs::create_symlink("..data/csi-proxy.toml", dir.Sub("volume/csi-proxy.toml"));
  const std::string mounted = dir.MakeDir("etc-csi-proxy");
  if (mount(dir.Sub("volume").c_str(), mounted.c_str(), nullptr, MS_BIND, nullptr) != 0 ||
      mount(nullptr, mounted.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr) != 0) {
    GTEST_SKIP() << "cannot make a read-only bind mount: " << std::strerror(errno);
  }
  struct Unmount {
    std::string path;
    ~Unmount() { umount2(path.c_str(), MNT_DETACH); }
  } unmount{mounted};
  auto file = OpenTrustedFile(mounted + "/csi-proxy.toml", "the configuration file");
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(*file->ReadAll(1024), "[host]\n");
  // The same directory where it can be written is refused.
  EXPECT_EQ(OpenTrustedFile(dir.Sub("volume/csi-proxy.toml"), "the configuration file").status().code(),
            Code::kPermissionDenied);
}

TEST(TrustedFiles, AFileOthersCanWriteIsRefused) {
  TempDir dir;
  std::string path = dir.Write("csi-proxy.toml", "x");
  fs::permissions(path, fs::perms::group_write, fs::perm_options::add);
  auto file = OpenTrustedFile(path, "the configuration file");
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.status().message().find("the configuration file " + path + " is writable by its group"),
            std::string::npos)
      << file.status().message();
}

TEST(TrustedFiles, AFifoOrALinkLoopIsRefusedWithoutHanging) {
  TempDir dir;
  ASSERT_EQ(mkfifo(dir.Sub("fifo").c_str(), 0600), 0);
  auto fifo = OpenTrustedFile(dir.Sub("fifo"), "the configuration file");
  ASSERT_FALSE(fifo.ok());
  EXPECT_NE(fifo.status().message().find("is not a regular file"), std::string::npos) << fifo.status().message();
  fs::create_symlink(dir.Sub("b"), dir.Sub("a"));
  fs::create_symlink(dir.Sub("a"), dir.Sub("b"));
  auto loop = OpenTrustedFile(dir.Sub("a"), "the library");
  ASSERT_FALSE(loop.ok());
  EXPECT_NE(loop.status().message().find("too many symbolic links"), std::string::npos) << loop.status().message();
  EXPECT_EQ(OpenTrustedFile(dir.Sub("missing"), "the library").status().code(), Code::kNotFound);
}

TEST(TrustedFiles, TheAuditLogIsCreatedPrivateAndALinkAtItsNameIsJudgedByWhereItLeads) {
  TempDir dir;
  auto log = OpenTrustedAppendFile(dir.Sub("audit.log"), "the audit log");
  ASSERT_TRUE(log.ok()) << log.status().message();
  struct stat st {};
  ASSERT_EQ(stat(dir.Sub("audit.log").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  fs::create_directories(dir.Sub("open"));
  fs::permissions(dir.Sub("open"), fs::perms::all);
  fs::create_symlink(dir.Sub("open/audit.log"), dir.Sub("linked.log"));
  auto linked = OpenTrustedAppendFile(dir.Sub("linked.log"), "the audit log");
  ASSERT_FALSE(linked.ok());
  EXPECT_NE(linked.status().message().find("lies in " + dir.Sub("open")), std::string::npos)
      << linked.status().message();
  EXPECT_FALSE(fs::exists(dir.Sub("open/audit.log")));
  // A FIFO nobody reads is refused at once rather than hanging the start.
  ASSERT_EQ(mkfifo(dir.Sub("fifo").c_str(), 0600), 0);
  auto fifo = OpenTrustedAppendFile(dir.Sub("fifo"), "the audit log");
  ASSERT_FALSE(fifo.ok());
  EXPECT_NE(fifo.status().message().find("a FIFO that no process reads"), std::string::npos) << fifo.status().message();
}

TEST(TrustedFiles, ADirectoryNotYetThereIsJudgedByTheDirectoriesAboveIt) {
  TempDir dir;
  EXPECT_TRUE(CheckTrustedDirectory(dir.Sub("state/csi-proxy"), "state_dir").ok());
  fs::create_directories(dir.Sub("open"));
  fs::permissions(dir.Sub("open"), fs::perms::all);
  Status under_open = CheckTrustedDirectory(dir.Sub("open/state"), "state_dir");
  EXPECT_EQ(under_open.code(), Code::kPermissionDenied) << under_open.message();
  Status open_itself = CheckTrustedDirectory(dir.Sub("open"), "endpoint_dir");
  EXPECT_NE(open_itself.message().find("endpoint_dir " + dir.Sub("open") + " is writable by its group or by others"),
            std::string::npos)
      << open_itself.message();
}

}  // namespace
}  // namespace csi_proxy::host

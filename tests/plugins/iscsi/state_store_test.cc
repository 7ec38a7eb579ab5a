// The iSCSI state directory: registered portals and the mutual CHAP secret survive a restart, are written
// atomically with private permissions (a process killed in the middle of a write leaves the old or the new file),
// and a broken state file is reported, not ignored.
#include "state_store_linux.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "file_tree.h"
#include "temp_dir.h"

namespace csi_proxy::iscsi {
namespace {

using testing::TempDir;

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(IscsiStateStore, NewDirectoryIsCreatedPrivateAndEmpty) {
  TempDir tmp;
  std::string dir = tmp.path() + "/var/lib/csi-proxy/iscsi";
  auto store = IscsiStateStore::Open(dir);
  ASSERT_TRUE(store.ok()) << store.status().message();
  EXPECT_EQ(ModeOf(dir), 0700u);
  EXPECT_TRUE((*store)->Portals().empty());
  EXPECT_FALSE((*store)->MutualChapSecret().has_value());
}

TEST(IscsiStateStore, PortalsSurviveReopeningInInsertionOrder) {
  TempDir tmp;
  {
    auto store = IscsiStateStore::Open(tmp.path() + "/s");
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->AddPortal({"10.0.0.2", 3260}).ok());
    ASSERT_TRUE((*store)->AddPortal({"10.0.0.1", 13260}).ok());
    ASSERT_TRUE((*store)->AddPortal({"10.0.0.2", 3260}).ok());  // again: no duplicate
  }
  auto reopened = IscsiStateStore::Open(tmp.path() + "/s");
  ASSERT_TRUE(reopened.ok()) << reopened.status().message();
  auto portals = (*reopened)->Portals();
  ASSERT_EQ(portals.size(), 2u);
  EXPECT_EQ(portals[0], (Portal{"10.0.0.2", 3260}));
  EXPECT_EQ(portals[1], (Portal{"10.0.0.1", 13260}));
}

TEST(IscsiStateStore, RemovingAPortalIsPersistedAndAMissingOneIsNotFound) {
  TempDir tmp;
  auto store = IscsiStateStore::Open(tmp.path());
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->AddPortal({"10.0.0.1", 3260}).ok());
  ASSERT_TRUE((*store)->RemovePortal({"10.0.0.1", 3260}).ok());
  EXPECT_EQ((*store)->RemovePortal({"10.0.0.1", 3260}).code(), Code::kNotFound);
  store->reset();
  auto reopened = IscsiStateStore::Open(tmp.path());
  ASSERT_TRUE(reopened.ok());
  EXPECT_TRUE((*reopened)->Portals().empty());
}

TEST(IscsiStateStore, StateFilesAreMode0600AndNoTemporariesRemain) {
  TempDir tmp;
  auto store = IscsiStateStore::Open(tmp.path());
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->AddPortal({"10.0.0.1", 3260}).ok());
  ASSERT_TRUE((*store)->SetMutualChapSecret("0123456789abcdef").ok());
  EXPECT_EQ(ModeOf(tmp.path() + "/portals"), 0600u);
  EXPECT_EQ(ModeOf(tmp.path() + "/mutual-chap-secret"), 0600u);
  EXPECT_EQ(Entries(tmp.path()), (std::vector<std::string>{"mutual-chap-secret", "portals"}));
}

TEST(IscsiStateStore, MutualChapSecretSurvivesReopeningAndCanBeCleared) {
  TempDir tmp;
  {
    auto store = IscsiStateStore::Open(tmp.path());
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->SetMutualChapSecret("first-secret-1").ok());
    ASSERT_TRUE((*store)->SetMutualChapSecret("second-secret-2").ok());
  }
  {
    auto store = IscsiStateStore::Open(tmp.path());
    ASSERT_TRUE(store.ok());
    EXPECT_EQ((*store)->MutualChapSecret(), "second-secret-2");
    ASSERT_TRUE((*store)->SetMutualChapSecret("").ok());
  }
  auto store = IscsiStateStore::Open(tmp.path());
  ASSERT_TRUE(store.ok());
  EXPECT_FALSE((*store)->MutualChapSecret().has_value());
  EXPECT_FALSE(std::filesystem::exists(tmp.path() + "/mutual-chap-secret"));
}

TEST(IscsiStateStore, TemporariesLeftByACrashAreRemovedAndTheOldStateKept) {
  TempDir tmp;
  {
    auto store = IscsiStateStore::Open(tmp.path());
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->AddPortal({"10.0.0.1", 3260}).ok());
  }
  // A crash between creating the temporary file and renaming it.
  std::ofstream(tmp.path() + "/.portals.tmp.12345") << "half-written";
  auto store = IscsiStateStore::Open(tmp.path());
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->Portals().size(), 1u);
  EXPECT_EQ(Entries(tmp.path()), (std::vector<std::string>{"portals"}));
}

TEST(IscsiStateStore, AProcessKilledWhileWritingLeavesWholeFilesAndTheNextOpenCleansUp) {
  TempDir tmp;
  std::mt19937 rng(std::random_device{}());
  for (int round = 0; round < 10; ++round) {
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      // Secrets are "s" followed by one repeated digit, so a torn file shows as a mixed or short one.
      auto store = IscsiStateStore::Open(tmp.path(), IscsiStateStore::kMaxPortalsLimit);
      if (!store.ok()) _exit(1);
      for (int i = 0;; ++i) {
        (void)(*store)->SetMutualChapSecret("s" + std::string(100 + i % 50, static_cast<char>('0' + i % 10)));
        Portal p{"10.2." + std::to_string(i % 200) + ".1", 3260};
        (void)(i % 3 == 0 ? (*store)->RemovePortal(p) : (*store)->AddPortal(p));
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5 + rng() % 60));
    kill(child, SIGKILL);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the writer stopped by itself (status " << status << ")";

    if (std::filesystem::exists(tmp.path() + "/mutual-chap-secret")) {
      EXPECT_EQ(ModeOf(tmp.path() + "/mutual-chap-secret"), 0600u);
      std::ifstream in(tmp.path() + "/mutual-chap-secret");
      std::string secret((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      ASSERT_GE(secret.size(), 101u) << "a torn secret: '" << secret << "'";
      EXPECT_EQ(secret[0], 's');
      EXPECT_EQ(secret.find_first_not_of(secret[1], 1), std::string::npos) << "a torn secret: '" << secret << "'";
    }
    // The next open reads whole files and removes the temporaries the kill may have left.
    auto store = IscsiStateStore::Open(tmp.path(), IscsiStateStore::kMaxPortalsLimit);
    ASSERT_TRUE(store.ok()) << store.status().message();
    for (const auto& name : Entries(tmp.path())) {
      EXPECT_TRUE(name == "portals" || name == "mutual-chap-secret") << name << " left after a reopen";
    }
  }
  EXPECT_TRUE(std::filesystem::exists(tmp.path() + "/mutual-chap-secret")) << "no write finished in ten rounds";
}

TEST(IscsiStateStore, AnUnparsablePortalsFileIsAnError) {
  TempDir tmp;
  std::ofstream(tmp.path() + "/portals") << "10.0.0.1 3260\nnot a portal line at all\n";
  auto store = IscsiStateStore::Open(tmp.path());
  EXPECT_EQ(store.status().code(), Code::kInternal);
  EXPECT_NE(store.status().message().find("line 2"), std::string::npos) << store.status().message();
}

TEST(IscsiStateStore, AnInvalidPortalInTheFileIsAnError) {
  TempDir tmp;
  std::ofstream(tmp.path() + "/portals") << "$(reboot) 3260\n";
  EXPECT_EQ(IscsiStateStore::Open(tmp.path()).status().code(), Code::kInternal);
}

TEST(IscsiStateStore, ASymlinkInPlaceOfTheDirectoryIsRefused) {
  TempDir tmp;
  std::filesystem::create_directory(tmp.path() + "/real");
  std::filesystem::create_directory_symlink(tmp.path() + "/real", tmp.path() + "/link");
  EXPECT_FALSE(IscsiStateStore::Open(tmp.path() + "/link").ok());
}

TEST(IscsiStateStore, RelativeDirectoryIsRefused) {
  EXPECT_EQ(IscsiStateStore::Open("var/lib/csi-proxy").status().code(), Code::kInvalidArgument);
}

TEST(IscsiStateStore, OpenNarrowsAGroupReadableDirectoryTo0700) {
  TempDir tmp;
  chmod(tmp.path().c_str(), 0755);
  ASSERT_TRUE(IscsiStateStore::Open(tmp.path()).ok());
  EXPECT_EQ(ModeOf(tmp.path()), 0700u);
}

TEST(IscsiStateStore, TheSecretFileHoldsExactlyTheSecret) {
  TempDir tmp;
  auto store = IscsiStateStore::Open(tmp.path());
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->SetMutualChapSecret("a;b$c`d").ok());
  EXPECT_EQ(testing::ReadFile(tmp.path() + "/mutual-chap-secret"), "a;b$c`d");
}

}  // namespace
}  // namespace csi_proxy::iscsi

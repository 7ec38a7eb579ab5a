// The SMB and iSCSI groups' Windows-only parts under Wine: the state records on Win32 (atomic writes, listing, a
// lock shared across handles), the SMB mapping users as the filesystem group uses them (links read on handles, a
// mapping released through the SMB client's WMI, which Wine lacks), the SMB backend's local_path checks on
// handles before anything is mapped, symlinks to UNC paths, IP literals through Winsock, and associators queries
// through the real WMI client. Their logic against recorded answers runs on Linux (tests/plugins/smb,
// tests/plugins/iscsi); the group DLLs run in groups_test and behind csi-proxy.exe in host_test.
#include <windows.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "confined_open_windows.h"
#include "ip_literal.h"
#include "iscsi_validation.h"
#include "recorded_smb_client.h"
#include "smb_backend.h"
#include "smb_global_mapping.h"
#include "smb_mapping_users.h"
#include "smb_service.h"
#include "smb_validation.h"
#include "state_records.h"
#include "symlink_windows.h"
#include "wmi_windows.h"

namespace csi_proxy {
namespace {

namespace wmi = common::wmi;
using namespace std::chrono_literals;

bool Exists(const std::string& path) { return ::GetFileAttributesA(path.c_str()) != INVALID_FILE_ATTRIBUTES; }

// Removes a tree made by the test (plain files and directories only).
void RemoveTree(const std::string& path) {
  WIN32_FIND_DATAA entry;
  HANDLE find = ::FindFirstFileA((path + "\\*").c_str(), &entry);
  if (find != INVALID_HANDLE_VALUE) {
    do {
      const std::string name = entry.cFileName;
      if (name == "." || name == "..") continue;
      const std::string child = path + "\\" + name;
      if (entry.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) {
        RemoveTree(child);
      } else {
        ::DeleteFileA(child.c_str());
      }
    } while (::FindNextFileA(find, &entry));
    ::FindClose(find);
  }
  ::RemoveDirectoryA(path.c_str());
}

// Names in a directory, for what a write left behind.
std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> names;
  WIN32_FIND_DATAA entry;
  HANDLE find = ::FindFirstFileA((dir + "\\*").c_str(), &entry);
  if (find == INVALID_HANDLE_VALUE) return names;
  do {
    const std::string name = entry.cFileName;
    if (name != "." && name != "..") names.push_back(name);
  } while (::FindNextFileA(find, &entry));
  ::FindClose(find);
  return names;
}

class WindowsScratch : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = "C:\\csi-smb-iscsi-test-" + std::to_string(::GetCurrentProcessId());
    RemoveTree(base_);
    ASSERT_TRUE(::CreateDirectoryA(base_.c_str(), nullptr));
    for (const char* dir : {"kubelet", "kubelet\\plugins", "state"}) {
      ASSERT_TRUE(::CreateDirectoryA((base_ + "\\" + dir).c_str(), nullptr));
    }
  }
  void TearDown() override { RemoveTree(base_); }

  std::string kubelet() const { return base_ + "\\kubelet"; }
  std::string state() const { return base_ + "\\state"; }
  common::PathPolicy Policy() const { return *common::PathPolicy::Create(kubelet(), {}); }

  std::string base_;
};

// ---- State records on Win32

using StateRecordsOnWindows = WindowsScratch;

TEST_F(StateRecordsOnWindows, RecordsAreWrittenWholeReadByAnyoneAndRemoved) {
  const std::string dir = state() + "\\records";
  common::StateRecords writer(dir), reader(dir);
  ASSERT_TRUE(writer.Put("link:C:\\x", {{"text", "line 1\nline 2 %"}}).ok());
  ASSERT_TRUE(writer.Put("pin://srv/share", {{"mapping", "//srv/share"}}).ok());
  auto got = reader.Get("link:C:\\x");
  ASSERT_TRUE(got.ok()) << got.status().message();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((**got)["text"], "line 1\nline 2 %");
  auto all = reader.List();
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_EQ(all->size(), 2u);
  EXPECT_EQ(Names(dir).size(), 2u) << "a write left a temporary file behind";
  ASSERT_TRUE(writer.Put("link:C:\\x", {{"text", "replaced"}}).ok());
  EXPECT_EQ((**reader.Get("link:C:\\x")).at("text"), "replaced");
  ASSERT_TRUE(reader.Remove("link:C:\\x").ok());
  EXPECT_FALSE(writer.Get("link:C:\\x")->has_value());
  EXPECT_TRUE(writer.Remove("link:C:\\x").ok());  // nothing to remove is success
  EXPECT_TRUE(common::StateRecords(state() + "\\absent").List()->empty());
}

TEST_F(StateRecordsOnWindows, ALockKeepsTheNextLockerWaitingUntilItIsReleased) {
  common::StateRecords records(state() + "\\records");
  auto held = std::make_unique<common::RecordLock>(records.Lock("mapping://srv/share").value());
  std::atomic<bool> second_has_it{false};
  std::thread second([&] {
    auto lock = common::StateRecords(state() + "\\records").Lock("mapping://srv/share");  // a handle of its own
    EXPECT_TRUE(lock.ok()) << lock.status().message();
    second_has_it = true;
  });
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(second_has_it) << "two holders of one lock";
  held.reset();
  second.join();
  EXPECT_TRUE(second_has_it);
  // Another name is another lock.
  auto a = records.Lock("a");
  auto b = records.Lock("b");
  EXPECT_TRUE(a.ok() && b.ok());
}

TEST_F(StateRecordsOnWindows, ARecordsDirectoryThatIsAFileIsRefused) {
  std::ofstream(state() + "\\records") << "not a directory";
  auto listed = common::StateRecords(state() + "\\records").List();
  EXPECT_EQ(listed.status().code(), Code::kPermissionDenied) << listed.status().message();
}

// ---- SMB mapping users, as the filesystem group and the SMB group count them on Windows

using SmbMappingUsersOnWindows = WindowsScratch;

TEST_F(SmbMappingUsersOnWindows, AMissingLinkOrADirectoryInItsPlaceIsNoUserAndAPinIsOne) {
  common::SmbMappingUsers users(state(), Policy());
  const common::SmbMapping mapping{"//srv/share", "\\\\srv\\share"};
  const std::string stage = kubelet() + "\\plugins\\stage";
  ASSERT_TRUE(users.AddLink(stage, "\\\\srv\\share\\pv-1\\", mapping).ok());
  auto use = users.Users(mapping.key);
  ASSERT_TRUE(use.ok()) << use.status().message();
  EXPECT_TRUE(use->links.empty());  // no link at the path (Wine cannot make one): the record is dropped
  ASSERT_TRUE(users.AddLink(stage, "\\\\srv\\share\\pv-1\\", mapping).ok());
  ASSERT_TRUE(::CreateDirectoryA(stage.c_str(), nullptr));
  EXPECT_TRUE(users.Users(mapping.key)->links.empty());  // a directory is no link
  ASSERT_TRUE(users.Pin(mapping).ok());
  EXPECT_TRUE(users.Users(mapping.key)->pinned);
  ASSERT_TRUE(users.Unpin(mapping.key).ok());
  EXPECT_FALSE(users.Users(mapping.key)->used());
}

TEST_F(SmbMappingUsersOnWindows, TheLastLinksRemovalRemovesTheGlobalMappingThroughTheSmbClient) {
  testing::RecordedWmi records;
  testing::RecordedSmbClient smb(records);
  smb.Map("\\\\srv\\share");
  // The system's own link check (a handle-relative read of the link), the recorded SMB client for the removal.
  common::SmbMappingUsers::System system{{}, [&](const common::SmbMapping& mapping) {
                                           auto session = records.Connector()(wmi::kSmbNamespace);
                                           if (!session.ok()) return session.status();
                                           return common::RemoveSmbGlobalMapping(**session, mapping.mount_point);
                                         }};
  common::SmbMappingUsers users(state(), Policy(), {}, system);
  ASSERT_TRUE(
      users.AddLink(kubelet() + "\\plugins\\a\\stage", "\\\\srv\\share\\a\\", {"//srv/share", "\\\\srv\\share"}).ok());
  auto released = users.ReleaseLinksGoneUnder(kubelet() + "\\PLUGINS\\a");  // any spelling of the removed path
  ASSERT_TRUE(released.ok()) << released.status().message();
  EXPECT_EQ(*released, std::vector<std::string>{"//srv/share"});
  EXPECT_FALSE(smb.IsMapped("\\\\srv\\share"));
}

bool UnderWine() {
  HMODULE ntdll = ::GetModuleHandleW(L"ntdll.dll");
  return ntdll != nullptr && ::GetProcAddress(ntdll, "wine_get_version") != nullptr;
}

// What the filesystem group's Rmdir does after it removed a link (SmbMappingUsers::ReleaseAfterRemoval) with the
// system's own unmapping: the SMB client's WMI, which Wine lacks. The removal stands, and the log says why the
// mapping stays.
TEST_F(SmbMappingUsersOnWindows, WithoutTheSmbClientsWmiARemovalKeepsTheMappingAndSaysWhy) {
  const std::string stage = kubelet() + "\\plugins\\stage";
  ASSERT_TRUE(common::SmbMappingUsers(state(), Policy())
                  .AddLink(stage, "\\\\srv\\share\\", {"//srv/share", "\\\\srv\\share"})
                  .ok());
  std::string log;
  common::SmbMappingUsers::ReleaseAfterRemoval(
      state(), Policy(), [&](sdk::LogLevel, std::string_view line) { log += line; }, stage);
  if (!UnderWine()) GTEST_SKIP() << "this system has the SMB client's WMI";
  EXPECT_NE(log.find("could not release the SMB mappings its links used"), std::string::npos) << log;
  EXPECT_NE(log.find("ROOT\\Microsoft\\Windows\\SMB"), std::string::npos) << log;
}

// ---- The SMB group's backend with the system's own links and WMI

using SmbGroupOnWindows = WindowsScratch;

TEST_F(SmbGroupOnWindows, LocalPathIsCheckedOnHandlesBeforeTheSmbClientIsAsked) {
  smb::SmbBackendOptions options;
  options.state_dir = state();
  auto backend = smb::MakeSmbBackend(options, Policy());
  ASSERT_TRUE(backend.ok()) << backend.status().message();
  smb::SmbService service(std::move(*backend), Policy(), {});
  const std::string remote = "\\\\srv\\share\\pv-1";
  Status missing = service.NewSmbGlobalMapping(remote, kubelet() + "\\absent\\stage", "u", "secret");
  EXPECT_EQ(missing.code(), Code::kNotFound) << missing.message();
  ASSERT_TRUE(::CreateDirectoryA((kubelet() + "\\plugins\\taken").c_str(), nullptr));
  Status taken = service.NewSmbGlobalMapping(remote, kubelet() + "\\plugins\\taken", "u", "secret");
  EXPECT_EQ(taken.code(), Code::kAlreadyExists) << taken.message();

  Status mapped = service.NewSmbGlobalMapping(remote, kubelet() + "\\plugins\\stage", "u", "secret");
  if (!UnderWine()) GTEST_SKIP() << "this system has the SMB client's WMI";
  EXPECT_EQ(mapped.code(), Code::kUnimplemented) << mapped.message();
  EXPECT_NE(mapped.message().find("ROOT\\Microsoft\\Windows\\SMB"), std::string::npos) << mapped.message();
  EXPECT_FALSE(Exists(kubelet() + "\\plugins\\stage"));
  EXPECT_EQ(service.RemoveSmbGlobalMapping(remote).code(), Code::kUnimplemented);
  EXPECT_FALSE(smb::CheckSmbSupport().ok());
}

TEST_F(SmbGroupOnWindows, ASymlinkToAUncPathIsMadeOnAHandleOrNotAtAll) {
  auto confined = Policy().Confine(kubelet() + "\\plugins\\stage");
  ASSERT_TRUE(confined.ok());
  auto parent = common::OpenParent(Policy(), *confined, "local_path");
  ASSERT_TRUE(parent.ok()) << parent.status().message();
  auto before = common::ReadEntryAt(parent->dir.get(), parent->name, "stage");
  ASSERT_TRUE(before.ok());
  EXPECT_FALSE(before->exists);
  Status made = common::MakeSymlinkAt(parent->dir.get(), parent->name, "\\\\srv\\share\\pv-1\\", true,
                                      "the local_path link 'stage'");
  auto after = common::ReadEntryAt(parent->dir.get(), parent->name, "stage");
  ASSERT_TRUE(after.ok());
  if (made.ok()) {  // Windows: a directory symlink whose target reads back as written
    EXPECT_EQ(after->symlink_target.value_or(""), "\\\\srv\\share\\pv-1\\");
    return;
  }
  // Wine: no reparse points; nothing half-made stays.
  EXPECT_EQ(made.code(), Code::kFailedPrecondition) << made.message();
  EXPECT_NE(made.message().find("cannot hold symlinks"), std::string::npos) << made.message();
  EXPECT_FALSE(after->exists);
  ASSERT_TRUE(::CreateDirectoryA((kubelet() + "\\plugins\\stage").c_str(), nullptr));
  auto directory = common::ReadEntryAt(parent->dir.get(), parent->name, "stage");
  EXPECT_TRUE(directory->exists);
  EXPECT_FALSE(directory->symlink_target.has_value());
}

// ---- Request checks with Winsock's inet_pton

TEST(IpLiteralsOnWindows, AddressesAreReadAsWinsockReadsThem) {
  EXPECT_TRUE(common::IsIpv4Literal("192.0.2.1"));
  EXPECT_FALSE(common::IsIpv4Literal("999.1.1.1"));
  EXPECT_FALSE(common::IsIpv4Literal("192.0.2"));
  EXPECT_TRUE(common::IsIpv6Literal("fd00::1"));
  EXPECT_TRUE(common::IsIpv6Literal("::ffff:192.0.2.1"));
  EXPECT_FALSE(common::IsIpv6Literal("[fd00::1]"));
  EXPECT_FALSE(common::IsIpv6Literal("192.0.2.1"));
  EXPECT_TRUE(smb::ParseRemotePath("\\\\192.0.2.1\\share").ok());
  EXPECT_EQ(smb::ParseRemotePath("\\\\999.1.1.1\\share").status().code(), Code::kInvalidArgument);
  auto portal = iscsi::ValidatePortal("[FD00::1]", 0);
  ASSERT_TRUE(portal.ok()) << portal.status().message();
  EXPECT_EQ(portal->address, "fd00::1");
  EXPECT_EQ(portal->port, 3260);
}

// ---- Associators through the real client (upstream's way from an iSCSI target to its sessions and disks)

TEST(WmiAssociatorsOnWindows, TheClientAsksWmiForAnObjectsAssociators) {
  auto session = common::ConnectWmi(wmi::kCimV2Namespace);
  ASSERT_TRUE(session.ok()) << session.status().message();
  auto disks = (*session)->Execute(wmi::Query{"Win32_DiskDrive", {}, {}});
  ASSERT_TRUE(disks.ok() && !disks->empty()) << disks.status().message();
  auto partitions = (*session)->Associated(
      disks->front(), wmi::Associators{"Win32_DiskDriveToDiskPartition", "Win32_DiskPartition", "", ""});
  ASSERT_TRUE(partitions.ok()) << partitions.status().message();
  for (const auto& partition : *partitions) EXPECT_EQ(partition.class_name(), "Win32_DiskPartition");
  auto absent = (*session)->Associated(disks->front(),
                                       wmi::Associators{"Win32_NoSuchAssociation", "Win32_DiskPartition", "", ""});
  EXPECT_EQ(absent.status().code(), Code::kUnimplemented) << absent.status().message();
}

}  // namespace
}  // namespace csi_proxy

// The six group libraries as built, in one process through the SDK's fake host (csi_proxy/testing/fake_host.hpp):
// each names itself with the group and version of the build, starts with its defaults, and refuses a bad value of
// any of its keys with INVALID_ARGUMENT quoting the key, which is what lets the host add the key's file and line.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "csi_proxy/testing/fake_host.hpp"
#include "temp_dir.h"

namespace csi_proxy::testing {
namespace {

using sdk::testing::FakeHost;
using sdk::testing::FakeHostOptions;

struct Group {
  const char* name;
  const char* library;
};

const Group kGroups[] = {
    {"disk", CSI_PROXY_DISK_LIBRARY},
    {"volume", CSI_PROXY_VOLUME_LIBRARY},
    {"filesystem", CSI_PROXY_FILESYSTEM_LIBRARY},
    {"smb", CSI_PROXY_SMB_LIBRARY},
    {"iscsi", CSI_PROXY_ISCSI_LIBRARY},
    {"system", CSI_PROXY_SYSTEM_LIBRARY},
};

class GroupKeys : public ::testing::TestWithParam<Group> {
 protected:
  // A fake host whose [host] settings point into a private directory, with the group's library negotiated.
  void Open(FakeHost& host) {
    ASSERT_TRUE(host.Load(GetParam().library).ok()) << GetParam().library;
    ASSERT_TRUE(host.Negotiate().ok());
  }
  FakeHostOptions Options() const {
    return {.kubelet_path = dir_.MakeDir("kubelet"), .working_dirs = {}, .state_dir = dir_.MakeDir("state")};
  }

  TempDir dir_;
};

TEST_P(GroupKeys, TheLibraryNamesTheGroupAndVersionOfTheBuildAndStartsWithItsDefaults) {
  FakeHost host(Options());
  Open(host);
  EXPECT_EQ(host.group(), GetParam().name);
  EXPECT_EQ(host.plugin_version(), CSI_PROXY_VERSION);
  auto status = host.Init();
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_FALSE(host.methods().empty());
  host.Shutdown();
  EXPECT_TRUE(host.violations().empty()) << host.violations().front();
}

// A configuration check runs the groups' inits beside a host that may serve the same state_dir: an init told it is
// a check (CSI_PROXY_INIT_CHECK_ONLY) creates, restricts and cleans up nothing there.
TEST_P(GroupKeys, ACheckOnlyInitLeavesTheStateDirectoryAlone) {
  const std::string state = dir_.Sub("state-of-a-running-host");
  FakeHost host({.kubelet_path = dir_.MakeDir("kubelet"), .working_dirs = {}, .state_dir = state, .check_only = true});
  Open(host);
  auto status = host.Init();
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_FALSE(host.methods().empty());
  host.Shutdown();
  EXPECT_FALSE(std::filesystem::exists(state)) << GetParam().name << " created " << state << " during a check";
}

TEST_P(GroupKeys, AnUnknownKeyIsRefusedQuotingIt) {
  FakeHost host(Options());
  Open(host);
  auto status = host.Init("no_such_key = 1\n");
  EXPECT_EQ(status.code(), Code::kInvalidArgument);
  EXPECT_NE(status.message().find("unknown key 'no_such_key' in [groups." + std::string(GetParam().name) + "]"),
            std::string::npos)
      << status.message();
}

INSTANTIATE_TEST_SUITE_P(EveryGroup, GroupKeys, ::testing::ValuesIn(kGroups),
                         [](const auto& info) { return std::string(info.param.name); });

// Each bad value, the key it must quote, and what the message says.
struct BadValue {
  const char* group;
  const char* toml;
  const char* expected;
};

const BadValue kBadValues[] = {
    {"disk", "partition_type = \"linux\"", "group key 'partition_type' must be a GPT type GUID"},
    {"volume", "default_fs_type = \"ntfs\"", "group key 'default_fs_type' must be one of ext4, ext3, ext2, xfs"},
    {"volume", "mount_nosuid_nodev = \"yes\"", "group key 'mount_nosuid_nodev' must be a boolean"},
    {"filesystem", "link_target_dirs = [\"smb\"]", "group key 'link_target_dirs' is refused"},
    {"filesystem", "link_target_dirs = \"/smb\"", "group key 'link_target_dirs' must be an array of strings"},
    {"smb", "port = 0", "group key 'port' must be an integer from 1 to 65535, not 0"},
    {"smb", "mount_timeout_seconds = 3601", "group key 'mount_timeout_seconds' must be an integer from 1 to 3600"},
    {"smb", "smb_version = \"3,x\"", "group key 'smb_version' must look like 3.1.1"},
    {"smb", "mount_helper = \"sbin/mount.cifs\"", "group key 'mount_helper' must be an absolute path or empty"},
    {"smb", "mount_root = \"/var/lib/../tmp\"", "group key 'mount_root' must not contain '.' or '..'"},
    {"smb", "require_privacy = 1", "group key 'require_privacy' must be a boolean"},
    {"iscsi", "max_portals = 0", "group key 'max_portals' must be an integer from 1 to 4000, not 0"},
    {"iscsi", "discovery_timeout_seconds = 0", "group key 'discovery_timeout_seconds' must be an integer from 1"},
    {"iscsi", "login_timeout_seconds = 3601", "group key 'login_timeout_seconds' must be an integer from 1 to 3600"},
    {"iscsi", "initiator_name = \"not an iqn\"", "group key 'initiator_name' is refused"},
    {"iscsi", "mutual_chap_username = \"two words\"", "group key 'mutual_chap_username' is refused"},
    {"iscsi", "state_dir = \"iscsi\"", "group key 'state_dir' must be an absolute path"},
    {"iscsi", "node_db_dir = \"nodes\"", "group key 'node_db_dir' must be an absolute path"},
    {"system", "service_timeout_seconds = 0", "group key 'service_timeout_seconds' must be an integer from 1 to 3600"},
    {"system", "systemd_private_socket = \"run/systemd/private\"",
     "group key 'systemd_private_socket' must be an absolute path or empty"},
    {"system", "systemd_bus_address = 5", "group key 'systemd_bus_address' must be a string"},
    {"system", "allowed_services = [\"a/b\"]", "group key 'allowed_services' is refused"},
    {"system", "allowed_services = [\"systemd-reboot\"]", "group key 'allowed_services' names systemd-reboot.service"},
    {"system", "bios_serial_files = [\"serial\"]", "group key 'bios_serial_files' must hold absolute paths"},
};

class GroupKeyValues : public ::testing::TestWithParam<BadValue> {};

TEST_P(GroupKeyValues, ABadValueIsInvalidArgumentQuotingTheKey) {
  const BadValue& bad = GetParam();
  const char* library = nullptr;
  for (const Group& g : kGroups) {
    if (std::string(g.name) == bad.group) library = g.library;
  }
  TempDir dir;
  FakeHost host({.kubelet_path = dir.MakeDir("kubelet"), .working_dirs = {}, .state_dir = dir.MakeDir("state")});
  ASSERT_TRUE(host.Load(library).ok());
  ASSERT_TRUE(host.Negotiate().ok());
  auto status = host.Init(std::string(bad.toml) + "\n");
  EXPECT_EQ(status.code(), Code::kInvalidArgument) << status.message();
  EXPECT_NE(status.message().find(bad.expected), std::string::npos) << status.message();
  EXPECT_TRUE(host.methods().empty());
}

INSTANTIATE_TEST_SUITE_P(EveryKey, GroupKeyValues, ::testing::ValuesIn(kBadValues), [](const auto& info) {
  std::string name = std::string(info.param.group) + "_" + std::to_string(info.index);
  return name;
});

}  // namespace
}  // namespace csi_proxy::testing

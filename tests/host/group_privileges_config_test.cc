// The privilege keys of a group table (capabilities, user, group, max_memory_bytes, max_open_files, max_tasks):
// the shipped groups' defaults, every key read, every mistake named with its key and line.
#include <gtest/gtest.h>

#include "config/config.h"
#include "config/group_privileges.h"
#include "serving/group_runtime.h"

namespace csi_proxy::host {
namespace {

StatusOr<HostConfig> Parse(const std::string& text) { return ParseConfig(text, "test.toml", "/opt/csi-proxy/bin"); }

// The privilege keys confine a group in a runner of its own and are refused for one in the host's process
// (RefuseUnappliedPrivileges), so the tables that set them say so, last, to keep the lines the messages name.
const std::string kIsolated = "isolation = \"process\"\n";

std::vector<int> Caps(std::initializer_list<const char*> names) {
  std::vector<int> out;
  for (const char* name : names) out.push_back(*CapabilityFromName(name));
  std::sort(out.begin(), out.end());
  return out;
}

TEST(GroupPrivilegesConfig, ATableWithoutTheKeysGetsItsGroupsDefaults) {
  auto c = Parse("[groups.disk]\n[groups.filesystem]\n[groups.vendor]\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  const GroupConfig& disk = c->groups[0];
  EXPECT_EQ(disk.privileges, DefaultGroupPrivileges("disk"));
  EXPECT_EQ(disk.privileges.capabilities, Caps({"CAP_SYS_ADMIN", "CAP_SYS_RAWIO"}));
  EXPECT_FALSE(disk.privileges.user);
  EXPECT_FALSE(disk.privileges.group);
  EXPECT_EQ(disk.privileges.max_memory_bytes, uint64_t{1024} << 20);
  EXPECT_EQ(disk.privilege_key, "");  // nothing asked for: shown nowhere, refused nowhere
  EXPECT_EQ(c->groups[1].privileges.capabilities, Caps({"CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_SYS_ADMIN"}));
  // A group the project does not ship gets no capability at all.
  EXPECT_EQ(c->groups[2].privileges.capabilities, std::vector<int>{});
  EXPECT_EQ(c->groups[2].privileges.max_open_files, 4096u);
}

TEST(GroupPrivilegesConfig, TheShippedGroupsDefaultsAreDescribed) {
  EXPECT_EQ(DescribePrivileges(DefaultGroupPrivileges("disk")),
            "capabilities: CAP_SYS_RAWIO,CAP_SYS_ADMIN; user: root; no_new_privs; seccomp: " +
                std::to_string(RefusedSystemCalls().size()) +
                " system calls refused, signals to the host refused (EPERM); limits: memory 1024 MiB, open files 4096, tasks 512");
  EXPECT_EQ(DefaultGroupPrivileges("iscsi").capabilities, std::vector<int>{});
  EXPECT_EQ(DefaultGroupPrivileges("system").capabilities, Caps({"CAP_SYS_ADMIN"}));
  EXPECT_EQ(DefaultGroupPrivileges("volume").capabilities,
            Caps({"CAP_SYS_ADMIN", "CAP_SYS_RESOURCE", "CAP_DAC_OVERRIDE"}));
  EXPECT_EQ(DefaultGroupPrivileges("smb").capabilities,
            Caps({"CAP_SYS_ADMIN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP",
                  "CAP_KILL"}));
  // Every shipped default stays within the shipped systemd unit's CapabilityBoundingSet, which bounds a runner.
  const std::vector<int> unit =
      Caps({"CAP_SYS_ADMIN", "CAP_SYS_RAWIO", "CAP_SYS_RESOURCE", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH",
            "CAP_FOWNER", "CAP_FSETID", "CAP_CHOWN", "CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_KILL"});
  for (const char* group : {"disk", "volume", "filesystem", "smb", "iscsi", "system"}) {
    for (int c : DefaultGroupPrivileges(group).capabilities) {
      EXPECT_TRUE(std::binary_search(unit.begin(), unit.end(), c)) << group << ": " << CapabilityName(c);
    }
  }
}

TEST(GroupPrivilegesConfig, EveryKeyIsReadAndNoneReachesTheLibrary) {
  auto c = Parse(R"([groups.filesystem]
own_key = 1
capabilities = ["CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_DAC_OVERRIDE"]
user = "nobody"
group = 4000
max_memory_bytes = 268435456
max_open_files = 256
max_tasks = 64
isolation = "process"
)");
  ASSERT_TRUE(c.ok()) << c.status().message();
  const GroupConfig& g = c->groups[0];
  EXPECT_EQ(g.privileges.capabilities, Caps({"CAP_DAC_OVERRIDE", "CAP_FOWNER"}));  // sorted, once each
  EXPECT_EQ(g.privileges.user, AccountId{65534});
  EXPECT_EQ(g.privileges.group, AccountId{4000});
  EXPECT_EQ(g.privileges.max_memory_bytes, 268435456u);
  EXPECT_EQ(g.privileges.max_open_files, 256u);
  EXPECT_EQ(g.privileges.max_tasks, 64u);
  EXPECT_EQ(g.privilege_key, "groups.filesystem.capabilities");
  EXPECT_EQ(g.privilege_key_line, 3);
  for (const char* key : {"capabilities", "user", "group", "max_memory_bytes", "max_open_files", "max_tasks"}) {
    EXPECT_FALSE(g.settings.contains(key)) << key;
    const auto& host_keys = GroupHostKeys();
    EXPECT_NE(std::find(host_keys.begin(), host_keys.end(), key), host_keys.end()) << key;
  }
  EXPECT_TRUE(g.settings.contains("own_key"));
  EXPECT_EQ(DescribePrivileges(g.privileges),
            "capabilities: CAP_DAC_OVERRIDE,CAP_FOWNER; user: nobody (65534); group: 4000; no_new_privs; seccomp: " +
                std::to_string(RefusedSystemCalls().size()) +
                " system calls refused, signals to the host refused (EPERM); limits: memory 256 MiB, open files 256, tasks 64");
}

TEST(GroupPrivilegesConfig, AKeyReplacesOnlyItsOwnPartOfTheDefaults) {
  auto c = Parse("[groups.volume]\nmax_tasks = 32\n" + kIsolated);
  ASSERT_TRUE(c.ok()) << c.status().message();
  GroupPrivileges expected = DefaultGroupPrivileges("volume");
  expected.max_tasks = 32;
  EXPECT_EQ(c->groups[0].privileges, expected);
  EXPECT_EQ(c->groups[0].privilege_key, "groups.volume.max_tasks");
  EXPECT_EQ(c->groups[0].privilege_key_line, 2);
}

TEST(GroupPrivilegesConfig, NoCapabilitiesZeroLimitsAndAUsersPrimaryGroup) {
  auto c =
      Parse("[groups.system]\ncapabilities = []\nuser = 65534\nmax_memory_bytes = 0\nmax_open_files = 0\n" + kIsolated);
  ASSERT_TRUE(c.ok()) << c.status().message();
  const GroupPrivileges& p = c->groups[0].privileges;
  EXPECT_EQ(p.capabilities, std::vector<int>{});
  EXPECT_EQ(p.user, AccountId{65534});
  EXPECT_EQ(p.group, AccountId{65534});  // nobody's primary group, from the user database
  EXPECT_EQ(p.max_memory_bytes, 0u);     // the host's own limit
  EXPECT_NE(DescribePrivileges(p).find("capabilities: none; user: 65534; group: 65534;"), std::string::npos)
      << DescribePrivileges(p);
  EXPECT_NE(DescribePrivileges(p).find("memory inherited, open files inherited, tasks 512"), std::string::npos);
}

TEST(GroupPrivilegesConfig, MistakesAreNamedWithTheirKeyAndLine) {
  struct Case {
    const char* text;
    const char* message;
  } cases[] = {
      {"[groups.disk]\n\ncapabilities = [\"CAP_SYS_ADMIN\", \"CAP_SYS_ADMN\"]\n",
       "test.toml:3: groups.disk.capabilities holds 'CAP_SYS_ADMN', which is not a Linux capability (names are "
       "written as in capabilities(7): CAP_SYS_ADMIN, CAP_DAC_OVERRIDE, ...)"},
      {"[groups.disk]\ncapabilities = [\"cap_sys_admin\"]\n",
       "test.toml:2: groups.disk.capabilities holds 'cap_sys_admin', which is not a Linux capability (names are "
       "written as in capabilities(7): CAP_SYS_ADMIN, CAP_DAC_OVERRIDE, ...)"},
      {"[groups.disk]\ncapabilities = \"CAP_SYS_ADMIN\"\n",
       "test.toml:2: groups.disk.capabilities must be an array of capability names such as \"CAP_SYS_ADMIN\""},
      {"[groups.disk]\ncapabilities = [21]\n",
       "test.toml:2: groups.disk.capabilities must be an array of capability names such as \"CAP_SYS_ADMIN\""},
      {"[groups.smb]\nuser = true\n", "test.toml:2: groups.smb.user must be a user name or uid"},
      {"[groups.smb]\nuser = \"\"\n", "test.toml:2: groups.smb.user must be a user name or uid"},
      {"[groups.smb]\nuser = \"no-such-user-csi\"\n",
       "test.toml:2: groups.smb.user is 'no-such-user-csi', which is not a known user"},
      {"[groups.smb]\nuser = -1\n", "test.toml:2: groups.smb.user is -1, not an id from 0 to 4294967294"},
      {"[groups.smb]\ngroup = [1]\n", "test.toml:2: groups.smb.group must be a group name or gid"},
      {"[groups.smb]\ngroup = \"no-such-group-csi\"\n",
       "test.toml:2: groups.smb.group is 'no-such-group-csi', which is not a known group"},
      {"[groups.smb]\nuser = 64999\n",
       "test.toml:2: groups.smb.user has no primary group to run as (uid 64999 has no entry in the user database); "
       "set groups.smb.group beside it"},
      {"[groups.disk]\nmax_memory_bytes = 1024\n",
       "test.toml:2: groups.disk.max_memory_bytes must be 0 (the host's own limit) or an integer from 16777216 to "
       "1125899906842624"},
      {"[groups.disk]\nmax_memory_bytes = \"1G\"\n",
       "test.toml:2: groups.disk.max_memory_bytes must be 0 (the host's own limit) or an integer from 16777216 to "
       "1125899906842624"},
      {"[groups.disk]\nmax_open_files = 8\n",
       "test.toml:2: groups.disk.max_open_files must be 0 (the host's own limit) or an integer from 16 to 1048576"},
      {"[groups.disk]\nmax_tasks = -1\n",
       "test.toml:2: groups.disk.max_tasks must be 0 (the host's own limit) or an integer from 1 to 4194304"},
      {"[groups.disk]\nmax_tasks = 1.5\n",
       "test.toml:2: groups.disk.max_tasks must be 0 (the host's own limit) or an integer from 1 to 4194304"},
  };
  for (const auto& c : cases) {
    auto parsed = Parse(c.text);
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_EQ(parsed.status().message(), c.message);
  }
  // A user with no entry is fine once the group is named.
  auto named = Parse("[groups.smb]\nuser = 64999\ngroup = 64999\n" + kIsolated);
  ASSERT_TRUE(named.ok()) << named.status().message();
  EXPECT_EQ(named->groups[0].privileges.group, AccountId{64999});
}

TEST(GroupPrivilegesConfig, AGroupInTheHostsProcessRefusesThePrivilegeKeys) {
  auto c = Parse("[groups.disk]\nworkers = 2\nmax_tasks = 16\ncapabilities = []\n" + kIsolated + "[groups.volume]\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  // As the parser asks of a table that runs its group in the host's process.
  Status refused = RefuseUnappliedPrivileges(c->groups[0], /*isolated=*/false);
  EXPECT_EQ(refused.code(), Code::kInvalidArgument);
  EXPECT_EQ(refused.message(),
            "test.toml:3: groups.disk.max_tasks confines a group's runner, and [groups.disk] runs in the host's "
            "process with the host's privileges; set isolation = \"process\" or remove the key");
  EXPECT_TRUE(RefuseUnappliedPrivileges(c->groups[0], /*isolated=*/true).ok());
  EXPECT_TRUE(RefuseUnappliedPrivileges(c->groups[1], /*isolated=*/false).ok());  // sets none
}

TEST(GroupPrivilegesConfig, OtherPrivilegesNeedAnotherInstanceOnReload) {
  auto a = Parse("[groups.disk]\nmax_open_files = 100\n" + kIsolated);
  auto b = Parse("[groups.disk]\nmax_open_files = 200\n" + kIsolated);
  auto c = Parse("[groups.disk]\nmax_open_files = 100\n" + kIsolated);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_NE(GroupRuntime::Fingerprint(a->groups[0], *a, "lib"), GroupRuntime::Fingerprint(b->groups[0], *b, "lib"));
  EXPECT_EQ(GroupRuntime::Fingerprint(a->groups[0], *a, "lib"), GroupRuntime::Fingerprint(c->groups[0], *c, "lib"));
}

}  // namespace
}  // namespace csi_proxy::host

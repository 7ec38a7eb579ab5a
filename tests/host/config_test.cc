// The configuration is the admin's interface: every mistake must be named with its key and line.
#include "config/config.h"
#include "serving/group_runtime.h"

#include <gtest/gtest.h>

namespace csi_proxy::host {
namespace {

StatusOr<HostConfig> Parse(const std::string& text) { return ParseConfig(text, "test.toml", "/opt/csi-proxy/bin"); }

TEST(Config, EmptyFileGivesDocumentedDefaults) {
  auto c = Parse("");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->endpoint_dir, "/run/csi-proxy");
  EXPECT_EQ(c->plugin_dir, "/opt/csi-proxy/lib/csi-proxy/plugins");
  EXPECT_EQ(c->kubelet_path, "/var/lib/kubelet");
  EXPECT_TRUE(c->working_dirs.empty());
  EXPECT_EQ(c->log_level, "info");
  EXPECT_EQ(c->socket_mode, 0660u);
  EXPECT_EQ(c->shutdown_timeout, std::chrono::seconds(30));
  EXPECT_TRUE(c->groups.empty());
}

TEST(Config, ReadsEveryHostKey) {
  auto c = Parse(R"(
[host]
endpoint_dir = "/run/x"
plugin_dir = "/usr/lib/x"
kubelet_path = "/var/lib/k"
working_dirs = ["/mnt/a", "/mnt/b"]
state_dir = "/var/lib/s"
log_level = "debug"
workers = 4
socket_mode = 0o600
socket_group = "disk"
shutdown_timeout_seconds = 5
)");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->endpoint_dir, "/run/x");
  EXPECT_EQ(c->plugin_dir, "/usr/lib/x");
  EXPECT_EQ(c->kubelet_path, "/var/lib/k");
  EXPECT_EQ(c->working_dirs, (std::vector<std::string>{"/mnt/a", "/mnt/b"}));
  EXPECT_EQ(c->state_dir, "/var/lib/s");
  EXPECT_EQ(c->workers, 4);
  EXPECT_EQ(c->socket_mode, 0600u);
  EXPECT_EQ(c->socket_group, "disk");
  EXPECT_EQ(c->shutdown_timeout, std::chrono::seconds(5));
}

TEST(Config, SocketModeAcceptsAnOctalString) {
  auto c = Parse("[host]\nsocket_mode = \"0640\"\n");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->socket_mode, 0640u);
  EXPECT_FALSE(Parse("[host]\nsocket_mode = \"rw-\"\n").ok());
  EXPECT_FALSE(Parse("[host]\nsocket_mode = 0o1777\n").ok());
}

TEST(Config, UnknownHostKeyIsNamedWithItsLine) {
  auto c = Parse("[host]\nendpoint_dir = \"/run/x\"\nendpont_dir = \"/run/y\"\n");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "test.toml:3: host.endpont_dir is not a known key");
}

TEST(Config, WrongTypeIsNamedWithItsLine) {
  auto c = Parse("\n[host]\nworkers = \"eight\"\n");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "test.toml:3: host.workers must be an integer from 1 to 1024");
  c = Parse("[groups.disk]\nenabled = \"yes\"\n");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "test.toml:2: groups.disk.enabled must be true or false");
}

TEST(Config, MalformedFileGivesTheLine) {
  auto c = Parse("[host]\nendpoint_dir = \"/run/x\nworkers = 2\n");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("test.toml:2:"), std::string::npos) << c.status().message();
}

TEST(Config, RelativePathsAreRefused) {
  auto c = Parse("[host]\nkubelet_path = \"var/lib/kubelet\"\n");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "test.toml:2: host.kubelet_path must be an absolute path, not 'var/lib/kubelet'");
  EXPECT_FALSE(Parse("[host]\nworking_dirs = [\"relative\"]\n").ok());
}

TEST(Config, UnknownTopLevelTableIsRefused) {
  auto c = Parse("[hosts]\nx = 1\n");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("hosts is not a known table"), std::string::npos);
}

TEST(Config, GroupDefaultsAndGroupKeysPassThrough) {
  auto c = Parse(R"(
[groups.volume]
enabled = true
default_fs_type = "xfs"
mkfs_timeout_seconds = 60

[groups.smb]
enabled = false
required = true
library = "/opt/vendor/libsmb.so"
versions = ["v1"]
)");
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_EQ(c->groups.size(), 2u);
  const GroupConfig& smb = c->groups[0];  // sorted by name
  const GroupConfig& volume = c->groups[1];
  EXPECT_EQ(volume.name, "volume");
  EXPECT_TRUE(volume.enabled);
  EXPECT_FALSE(volume.required);
  EXPECT_EQ(volume.library, "/opt/csi-proxy/lib/csi-proxy/plugins/libcsi-proxy-volume.so");
  EXPECT_EQ(volume.settings["default_fs_type"].value_or(std::string()), "xfs");
  EXPECT_EQ(volume.settings["mkfs_timeout_seconds"].value_or(int64_t{0}), 60);
  EXPECT_FALSE(volume.settings.contains("enabled"));
  EXPECT_FALSE(smb.enabled);
  EXPECT_TRUE(smb.required);
  EXPECT_EQ(smb.library, "/opt/vendor/libsmb.so");
  EXPECT_EQ(smb.versions, std::vector<std::string>{"v1"});
}

TEST(Config, BadVersionNamesAreRefused) {
  auto c = Parse("[groups.disk]\nversions = [\"v1\", \"latest\"]\n");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("'latest', not a version"), std::string::npos);
  EXPECT_TRUE(Parse("[groups.disk]\nversions = [\"v1\", \"v1alpha2\", \"v2beta1\"]\n").ok());
}

TEST(Config, BadGroupNamesAreRefused) { EXPECT_FALSE(Parse("[groups.\"Disk-X\"]\nenabled = true\n").ok()); }

TEST(Config, TheAdminSocketLivesBesideTheEndpointDirectory) {
  auto c = Parse("[host]\nendpoint_dir = \"/run/x/\"\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->admin_socket, "/run/x-admin.sock");
  auto d = Parse("[host]\nadmin_socket = \"/run/admin.sock\"\nmax_connections = 100\nmax_connections_per_uid = 10\n");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->admin_socket, "/run/admin.sock");
  EXPECT_EQ(d->max_connections, 100);
  EXPECT_EQ(d->max_connections_per_uid, 10);
}

TEST(Config, ConnectionLimitsAndTimeouts) {
  auto defaults = Parse("[host]\n");
  ASSERT_TRUE(defaults.ok()) << defaults.status().message();
  EXPECT_EQ(defaults->max_connections_per_endpoint, 0);  // half of max_connections
  EXPECT_EQ(defaults->handshake_timeout, std::chrono::seconds(10));
  EXPECT_EQ(defaults->idle_timeout, std::chrono::seconds(300));
  auto c =
      Parse("[host]\nmax_connections_per_endpoint = 50\nhandshake_timeout_seconds = 2\nidle_timeout_seconds = 60\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->max_connections_per_endpoint, 50);
  EXPECT_EQ(c->handshake_timeout, std::chrono::seconds(2));
  EXPECT_EQ(c->idle_timeout, std::chrono::seconds(60));
  auto bad = Parse("[host]\nhandshake_timeout_seconds = 0\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("test.toml:2: host.handshake_timeout_seconds must be an integer from 1"),
            std::string::npos)
      << bad.status().message();
}

TEST(Config, BudgetKeysAreTheHostsAndNeverReachTheLibrary) {
  auto c = Parse("[groups.disk]\nworkers = 3\nmax_queued_calls = 7\nmax_request_bytes = 2048\nown_key = 1\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_EQ(c->groups.size(), 1u);
  EXPECT_EQ(c->groups[0].workers, 3);
  EXPECT_EQ(c->groups[0].max_queued_calls, 7);
  EXPECT_EQ(c->groups[0].max_request_bytes, 2048);
  EXPECT_FALSE(c->groups[0].settings.contains("workers"));
  EXPECT_TRUE(c->groups[0].settings.contains("own_key"));
  auto bad = Parse("[groups.disk]\nmax_request_bytes = 10\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("test.toml:2: groups.disk.max_request_bytes must be an integer"),
            std::string::npos)
      << bad.status().message();
}

TEST(Config, ASocketGroupOutOfRangeIsAnErrorNotACrash) {
  for (const char* gid : {"99999999999999999999", "4294967295"}) {
    auto c = Parse(std::string("[host]\nsocket_group = \"") + gid + "\"\n");
    ASSERT_FALSE(c.ok()) << gid;
    EXPECT_NE(c.status().message().find("host.socket_group must be a group name or gid"), std::string::npos)
        << c.status().message();
  }
  EXPECT_FALSE(Parse("[host]\nsocket_group = \"no-such-group-csi\"\n").ok());
}

TEST(Config, AuthorizationListsAreHostKeysOutsideTheReloadFingerprint) {
  auto c = Parse(R"([host]
allowed_uids = [1000, "root"]
read_only_gids = ["root", 2000]

[groups.disk]
allowed_gids = [1000]
read_only_uids = []
own_key = 1
)");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->access.allowed_uids, (std::vector<uint32_t>{1000, 0}));  // names resolve when the file is read
  EXPECT_EQ(c->access.read_only_gids, (std::vector<uint32_t>{0, 2000}));
  EXPECT_FALSE(c->access.allowed_gids);
  const GroupConfig& g = c->groups[0];
  EXPECT_EQ(g.access.allowed_gids, (std::vector<uint32_t>{1000}));
  EXPECT_EQ(g.access.read_only_uids, std::vector<uint32_t>{});
  EXPECT_FALSE(g.access.allowed_uids);
  EXPECT_FALSE(g.settings.contains("allowed_gids"));
  EXPECT_FALSE(g.settings.contains("read_only_uids"));
  EXPECT_TRUE(g.settings.contains("own_key"));

  // Changing only the lists leaves the group's fingerprint, and so its loaded library, alone.
  auto d = Parse("[host]\nallowed_uids = [5]\n[groups.disk]\nallowed_gids = [7, 8]\nown_key = 1\n");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(GroupRuntime::Fingerprint(c->groups[0], *c, "library"),
            GroupRuntime::Fingerprint(d->groups[0], *d, "library"));
}

TEST(Config, AuthorizationListMistakesAreNamedWithTheirLine) {
  struct Case {
    const char* text;
    const char* message;
  } cases[] = {
      {"[groups.disk]\nallowed_uids = 1000\n",
       "test.toml:2: groups.disk.allowed_uids must be an array of uids or user names"},
      {"[groups.disk]\n\nallowed_gids = [1, -5]\n",
       "test.toml:3: groups.disk.allowed_gids holds -5, not an id from 0 to 4294967294"},
      {"[host]\nread_only_uids = [4294967295]\n",
       "test.toml:2: host.read_only_uids holds 4294967295, not an id from 0 to 4294967294"},
      {"[host]\nread_only_gids = [1.5]\n", "test.toml:2: host.read_only_gids must be an array of gids or group names"},
      {"[host]\nallowed_uids = [\"\"]\n", "test.toml:2: host.allowed_uids must be an array of uids or user names"},
      {"[host]\nallowed_uids = [\"no-such-user-csi\"]\n",
       "test.toml:2: host.allowed_uids holds 'no-such-user-csi', which is not a known user"},
      {"[groups.smb]\nallowed_gids = [\"no-such-group-csi\"]\n",
       "test.toml:2: groups.smb.allowed_gids holds 'no-such-group-csi', which is not a known group"},
      {"[host]\nallowed_uid = [1]\n", "test.toml:2: host.allowed_uid is not a known key"},
  };
  for (const auto& c : cases) {
    auto parsed = Parse(c.text);
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_EQ(parsed.status().message(), c.message);
  }
}

}  // namespace
TEST(Config, DefaultConfigPathIsBesideTheExecutableExceptInEtcForUsr) {
  EXPECT_EQ(DefaultConfigPath("/opt/csi-proxy/bin"), "/opt/csi-proxy/etc/csi-proxy/csi-proxy.toml");
  EXPECT_EQ(DefaultConfigPath("/usr/bin"), "/etc/csi-proxy/csi-proxy.toml");
  EXPECT_EQ(DefaultConfigPath("/usr/local/bin"), "/usr/local/etc/csi-proxy/csi-proxy.toml");
}

}  // namespace csi_proxy::host

// Who may call what, through the real host and its sockets: a caller connects as another uid (and gid and
// supplementary groups), and the host checks every call against the group's allowed_* and read_only_* lists
// before the library sees it.
#include <fcntl.h>
#include <grp.h>
#include <grpcpp/create_channel_posix.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "csi_proxy/admin/v1/admin.grpc.pb.h"
#include "grpc_client.h"
#include "host_process.h"
#include "v1/echo.pb.h"

namespace csi_proxy::testing {
namespace {

constexpr uid_t kNobody = 65534;

std::string Fixture(const std::string& name) { return BuildDir() + "/tests/fixtures/libcsi-proxy-" + name + ".so"; }

struct Identity {
  uid_t uid;
  gid_t gid;
  std::vector<gid_t> groups;  // supplementary
};

// Connects to `path` from a child process that has taken `who`'s credentials (the kernel records them at connect
// time), and hands the connected socket back over a socketpair. The child uses no gRPC: only system calls between
// fork and _exit. Returns the fd, or -1.
int ConnectAs(const std::string& path, const Identity& who) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return -1;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(pair[0]);
    if (setgroups(who.groups.size(), who.groups.data()) != 0 || setgid(who.gid) != 0 || setuid(who.uid) != 0) {
      _exit(1);
    }
    int conn = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (conn < 0 || connect(conn, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) _exit(2);
    char byte = 0;
    iovec iov{&byte, 1};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &conn, sizeof conn);
    _exit(sendmsg(pair[1], &msg, 0) == 1 ? 0 : 3);
  }
  close(pair[1]);
  int fd = -1;
  if (pid > 0) {
    char byte;
    iovec iov{&byte, 1};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    if (recvmsg(pair[0], &msg, MSG_CMSG_CLOEXEC) == 1) {
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      if (c != nullptr && c->cmsg_type == SCM_RIGHTS) std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
    }
    waitpid(pid, nullptr, 0);
  }
  close(pair[0]);
  return fd;
}

// A channel over one connection made as `who`.
std::shared_ptr<grpc::Channel> DialAs(const std::string& path, const Identity& who) {
  int fd = ConnectAs(path, who);
  if (fd < 0) return nullptr;
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return grpc::CreateInsecureChannelFromFd("localhost", fd);
}

const Identity kNobodyIdentity{kNobody, kNobody, {}};

v1::EchoRequest Text(const std::string& text) {
  v1::EchoRequest r;
  r.set_text(text);
  return r;
}

grpc::Status EchoAs(HostProcess& host, const Identity& who, const std::string& endpoint = "csi-proxy-echo-v1") {
  auto channel = DialAs(host.endpoint(endpoint), who);
  if (!channel) return grpc::Status(grpc::StatusCode::UNKNOWN, "could not connect as uid " + std::to_string(who.uid));
  v1::EchoResponse resp;
  return Call(channel, "/v1.Echo/Echo", Text("hi"), &resp, std::chrono::seconds(10));
}

// WhoAmI as root (which the test's lists must admit): how many Echo calls the library has handled.
int64_t EchoCallsSeenByTheLibrary(HostProcess& host) {
  v1::WhoAmIResponse who;
  auto s = Call(Dial(host.endpoint("csi-proxy-echo-v1")), "/v1.Echo/WhoAmI", v1::WhoAmIRequest(), &who);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return s.ok() ? who.echo_calls() : -1;
}

size_t Count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1)) ++n;
  return n;
}

// Whether `log` holds "<path>:<line>: <what>".
bool NamesFileAndLine(const std::string& log, const std::string& path, const std::string& what) {
  for (size_t at = log.find(": " + what); at != std::string::npos; at = log.find(": " + what, at + 1)) {
    size_t digits = at;
    while (digits > 0 && std::isdigit(static_cast<unsigned char>(log[digits - 1]))) --digits;
    if (digits == at || digits == 0 || log[digits - 1] != ':') continue;
    size_t start = digits - 1;
    if (start >= path.size() && log.compare(start - path.size(), path.size(), path) == 0) return true;
  }
  return false;
}

class Authorization : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to call as another uid";
  }
  // A host whose endpoints another uid can reach (the socket mode lets everyone in: the lists decide).
  bool StartHost(HostProcess& host, const std::vector<std::string>& endpoints) {
    if (chmod(host.dir().c_str(), 0755) != 0) return false;
    return host.Start(endpoints);
  }
  static constexpr const char* kOpenSockets = "socket_mode = \"0666\"\n";
};

TEST_F(Authorization, ARefusedCallIsPermissionDeniedNamingUidAndGroupAndNeverReachesTheLibrary) {
  HostProcess host("[groups.echo]\n", std::string(kOpenSockets) + "allowed_uids = [0]\naudit_log = \"-\"\n");
  ASSERT_TRUE(StartHost(host, {"csi-proxy-echo-v1"})) << host.error();

  auto refused = EchoAs(host, kNobodyIdentity);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::PERMISSION_DENIED) << refused.error_message();
  EXPECT_EQ(refused.error_message(),
            "uid 65534 (gid 65534) may not call /v1.Echo/Echo of group 'echo': it is not in allowed_uids or "
            "allowed_gids");
  EXPECT_EQ(EchoCallsSeenByTheLibrary(host), 0);
  EXPECT_NE(host.log().find("refused a call: uid 65534 (gid 65534) may not call /v1.Echo/Echo"), std::string::npos)
      << host.log();
  // The audit log (here on standard error) records the refusal, from its writer thread a moment after the answer.
  for (int i = 0; i < 500 && host.log().find("method=/v1.Echo/Echo pid=") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_NE(host.log().find("method=/v1.Echo/Echo pid="), std::string::npos) << host.log();
  EXPECT_NE(host.log().find("uid=65534 gid=65534 code=PERMISSION_DENIED"), std::string::npos) << host.log();

  // Root is listed: served, and the library counts it.
  v1::EchoResponse resp;
  EXPECT_TRUE(Call(Dial(host.endpoint("csi-proxy-echo-v1")), "/v1.Echo/Echo", Text("hi"), &resp).ok());
  EXPECT_EQ(EchoCallsSeenByTheLibrary(host), 1);

  // A caller that keeps trying costs one log line per ten seconds, not one per call.
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(EchoAs(host, kNobodyIdentity).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Count(host.log(), "refused a call: uid 65534"), 1u) << host.log();
  EXPECT_EQ(host.Stop(), 0);
}

// Whether this kernel gives a pidfd of a socket's peer (SO_PEERPIDFD, Linux 6.5).
bool KernelPinsPeers() {
  constexpr int kSoPeerPidfd = 77;
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) return false;
  int pidfd = -1;
  socklen_t len = sizeof pidfd;
  bool pins = getsockopt(pair[0], SOL_SOCKET, kSoPeerPidfd, &pidfd, &len) == 0 && pidfd >= 0;
  if (pidfd >= 0) close(pidfd);
  close(pair[0]);
  close(pair[1]);
  return pins;
}

// A socket carries the credentials of the process that connected to whoever holds it: here the child that
// connected as nobody has exited, and the test (root) calls through its socket. By default the call is the
// child's, as the kernel recorded it; with check_caller_process it is refused, since the connecting process is
// gone.
TEST_F(Authorization, WithCheckCallerProcessAConnectionWhoseProcessHasExitedIsRefused) {
  if (!KernelPinsPeers()) GTEST_SKIP() << "this kernel has no SO_PEERPIDFD (Linux 6.5 or later)";
  HostProcess passed("[groups.echo]\n", std::string(kOpenSockets) + "allowed_uids = [65534]\n");
  ASSERT_TRUE(StartHost(passed, {"csi-proxy-echo-v1"})) << passed.error();
  EXPECT_TRUE(EchoAs(passed, kNobodyIdentity).ok()) << "rights travel with the socket by default";
  EXPECT_EQ(passed.Stop(), 0);

  HostProcess host("[groups.echo]\n",
                   std::string(kOpenSockets) + "allowed_uids = [65534, 0]\ncheck_caller_process = true\n");
  ASSERT_TRUE(StartHost(host, {"csi-proxy-echo-v1"})) << host.error();
  auto refused = EchoAs(host, kNobodyIdentity);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::PERMISSION_DENIED) << refused.error_message();
  EXPECT_NE(refused.error_message().find("uid 65534 (gid 65534) may not call /v1.Echo/Echo of group 'echo': the "
                                         "process that connected (pid "),
            std::string::npos)
      << refused.error_message();
  EXPECT_NE(refused.error_message().find(") has exited: another process uses its connection"), std::string::npos);
  EXPECT_EQ(EchoCallsSeenByTheLibrary(host), 0);
  // A caller that connects itself, and still runs, is served.
  v1::EchoResponse resp;
  EXPECT_TRUE(Call(Dial(host.endpoint("csi-proxy-echo-v1")), "/v1.Echo/Echo", Text("hi"), &resp).ok());
  EXPECT_EQ(host.Stop(), 0);
}

TEST_F(Authorization, AllowedUidsAdmitTheCallerAndRootPassesOnlyWhenListed) {
  HostProcess host("[groups.echo]\nallowed_uids = [65534]\n", kOpenSockets);
  ASSERT_TRUE(StartHost(host, {"csi-proxy-echo-v1"})) << host.error();
  auto allowed = EchoAs(host, kNobodyIdentity);
  EXPECT_TRUE(allowed.ok()) << allowed.error_message();

  v1::EchoResponse resp;
  auto root = Call(Dial(host.endpoint("csi-proxy-echo-v1")), "/v1.Echo/Echo", Text("hi"), &resp);
  EXPECT_EQ(root.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(root.error_message().find("uid 0 (gid 0) may not call /v1.Echo/Echo of group 'echo'"), std::string::npos)
      << root.error_message();
  EXPECT_EQ(host.Stop(), 0);
}

TEST_F(Authorization, ReadOnlyCallersMayCallReadOnlyMethodsOnlyAndAVersion1LibraryCountsAsMutating) {
  HostProcess host("[groups.echo]\n[groups.version1]\nlibrary = \"" + Fixture("version1") + "\"\n",
                   std::string(kOpenSockets) + "allowed_uids = [0]\nread_only_uids = [65534]\n");
  ASSERT_TRUE(StartHost(host, {"csi-proxy-echo-v1", "csi-proxy-version1-v1"})) << host.error();

  auto channel = DialAs(host.endpoint("csi-proxy-echo-v1"), kNobodyIdentity);
  ASSERT_TRUE(channel);
  v1::WhoAmIResponse who;
  auto read = Call(channel, "/v1.Echo/WhoAmI", v1::WhoAmIRequest(), &who);
  ASSERT_TRUE(read.ok()) << read.error_message();
  EXPECT_EQ(who.uid(), kNobody);

  v1::EchoResponse resp;
  auto write = Call(channel, "/v1.Echo/Echo", Text("hi"), &resp);
  EXPECT_EQ(write.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(write.error_message(),
            "uid 65534 (gid 65534) may not call /v1.Echo/Echo of group 'echo': the method changes the node, and the "
            "caller is only in read_only_uids or read_only_gids");

  // The version-1 library declares no flags: its one method is mutating.
  auto old = EchoAs(host, kNobodyIdentity, "csi-proxy-version1-v1");
  EXPECT_EQ(old.error_code(), grpc::StatusCode::PERMISSION_DENIED) << old.error_message();
  EXPECT_NE(old.error_message().find("of group 'version1'"), std::string::npos) << old.error_message();
  EXPECT_TRUE(Call(Dial(host.endpoint("csi-proxy-version1-v1")), "/v1.Echo/Echo", Text("hi"), &resp).ok());

  // A caller in no list may not even read.
  auto stranger = DialAs(host.endpoint("csi-proxy-echo-v1"), Identity{4321, 4321, {}});
  ASSERT_TRUE(stranger);
  auto s = Call(stranger, "/v1.Echo/WhoAmI", v1::WhoAmIRequest(), &who);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(s.error_message().find("it is not in allowed_uids, allowed_gids, read_only_uids or read_only_gids"),
            std::string::npos)
      << s.error_message();
  channel.reset();  // a connection made from an fd stays open after the host's GOAWAY, which delays its stop
  stranger.reset();
  EXPECT_EQ(host.Stop(), 0);
}

TEST_F(Authorization, SupplementaryGroupsCount) {
  HostProcess host("[groups.echo]\nallowed_gids = [4242]\nread_only_gids = [4343]\n", kOpenSockets);
  ASSERT_TRUE(StartHost(host, {"csi-proxy-echo-v1"})) << host.error();
  EXPECT_EQ(EchoAs(host, kNobodyIdentity).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  auto member = EchoAs(host, Identity{kNobody, kNobody, {100, 4242}});
  EXPECT_TRUE(member.ok()) << member.error_message();
  // The primary gid counts too.
  auto primary = EchoAs(host, Identity{kNobody, 4242, {}});
  EXPECT_TRUE(primary.ok()) << primary.error_message();
  // A read-only group admits reads only.
  auto reader = DialAs(host.endpoint("csi-proxy-echo-v1"), Identity{kNobody, kNobody, {4343}});
  ASSERT_TRUE(reader);
  v1::WhoAmIResponse who;
  EXPECT_TRUE(Call(reader, "/v1.Echo/WhoAmI", v1::WhoAmIRequest(), &who).ok());
  EXPECT_EQ(EchoAs(host, Identity{kNobody, kNobody, {4343}}).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  reader.reset();  // a connection made from an fd stays open after the host's GOAWAY, which delays its stop
  EXPECT_EQ(host.Stop(), 0);
}

TEST_F(Authorization, AReloadThatChangesOnlyTheListsAppliesWithoutReloadingTheLibrary) {
  HostProcess host("[groups.echo]\ngreeting = \"x\"\nallowed_uids = [0]\n", kOpenSockets);
  ASSERT_TRUE(StartHost(host, {"csi-proxy-echo-v1"})) << host.error();
  EXPECT_EQ(EchoAs(host, kNobodyIdentity).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  v1::EchoResponse resp;
  ASSERT_TRUE(Call(Dial(host.endpoint("csi-proxy-echo-v1")), "/v1.Echo/Echo", Text("hi"), &resp).ok());

  host.WriteConfig("[groups.echo]\ngreeting = \"x\"\nallowed_uids = [0, 65534]\n", kOpenSockets);
  ASSERT_TRUE(host.Reload()) << host.log();
  EXPECT_NE(host.log().find("applied group 'echo' authorization lists (the library was not reloaded)"),
            std::string::npos)
      << host.log();
  EXPECT_EQ(Count(host.log(), "echo group ready"), 1u) << host.log();
  auto now_allowed = EchoAs(host, kNobodyIdentity);
  EXPECT_TRUE(now_allowed.ok()) << now_allowed.error_message();
  EXPECT_EQ(EchoCallsSeenByTheLibrary(host), 2);  // the same instance: it counted both calls

  // Removing the lists opens the group to whoever the socket admits, again without a library reload.
  host.WriteConfig("[groups.echo]\ngreeting = \"x\"\n", kOpenSockets);
  ASSERT_TRUE(host.Reload()) << host.log();
  EXPECT_EQ(Count(host.log(), "authorization lists (the library was not reloaded)"), 2u) << host.log();
  EXPECT_TRUE(EchoAs(host, Identity{4321, 4321, {}}).ok());
  EXPECT_EQ(Count(host.log(), "echo group ready"), 1u) << host.log();
  EXPECT_EQ(host.Stop(), 0);
}

TEST_F(Authorization, ListMistakesRefuseTheStartAndAReloadWithFileLineAndKey) {
  HostProcess bad("[groups.echo]\ngreeting = \"x\"\nallowed_uids = [1000, -1]\n");
  EXPECT_EQ(bad.RunToExit({}), 1);
  EXPECT_TRUE(NamesFileAndLine(bad.log(), bad.config_path(), "groups.echo.allowed_uids holds -1, not an id"))
      << bad.log();

  HostProcess wrong_type("[groups.echo]\n", "read_only_gids = 1000\n");
  EXPECT_EQ(wrong_type.RunToExit({}), 1);
  EXPECT_NE(wrong_type.log().find(": host.read_only_gids must be an array of gids or group names"), std::string::npos)
      << wrong_type.log();

  // A reload with a mistake changes nothing: the old lists stay.
  HostProcess host("[groups.echo]\nallowed_uids = [0]\n", kOpenSockets);
  ASSERT_TRUE(StartHost(host, {"csi-proxy-echo-v1"})) << host.error();
  host.WriteConfig("[groups.echo]\nallowed_uids = [0, \"no-such-user-here\"]\n", kOpenSockets);
  ASSERT_TRUE(host.Reload()) << host.log();
  EXPECT_TRUE(NamesFileAndLine(host.log(), host.config_path(),
                               "groups.echo.allowed_uids holds 'no-such-user-here', which is not a known user"))
      << host.log();
  EXPECT_EQ(EchoAs(host, kNobodyIdentity).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(host.Stop(), 0);
}

// Names of the methods each shipped group declares read-only, in any version (upstream's names).
const std::map<std::string, std::set<std::string>> kReadOnly = {
    {"filesystem", {"PathExists", "IsSymlink", "IsMountPoint"}},
    {"disk",
     {"ListDiskLocations", "ListDiskIDs", "GetDiskStats", "DiskStats", "GetDiskState", "GetAttachState",
      "GetDiskNumberByName"}},
    {"volume",
     {"ListVolumesOnDisk", "IsVolumeFormatted", "GetVolumeStats", "VolumeStats", "GetDiskNumberFromVolumeID",
      "GetVolumeDiskNumber", "GetVolumeIDFromTargetPath", "GetVolumeIDFromMount", "GetClosestVolumeIDFromTargetPath"}},
    {"smb", {}},
    {"iscsi", {"ListTargetPortals", "GetTargetDisks"}},
    {"system", {"GetBIOSSerialNumber", "GetService"}},
};

TEST(ReadOnlyMethods, EveryShippedGroupDeclaresTheIntendedSet) {
  std::string groups;
  for (const auto& [group, methods] : kReadOnly) groups += "[groups." + group + "]\n";
  HostProcess host(groups);
  ASSERT_TRUE(host.Start({"csi-proxy-filesystem-v1", "csi-proxy-disk-v1", "csi-proxy-volume-v1", "csi-proxy-smb-v1",
                          "csi-proxy-iscsi-v1alpha2", "csi-proxy-system-v1alpha1"}))
      << host.error() << host.log();
  auto admin = admin::v1::Admin::NewStub(Dial(host.admin_socket()));
  grpc::ClientContext ctx;
  admin::v1::StatusResponse status;
  ASSERT_TRUE(admin->Status(&ctx, admin::v1::StatusRequest(), &status).ok());
  ASSERT_EQ(status.groups_size(), static_cast<int>(kReadOnly.size()));
  for (const auto& g : status.groups()) {
    // /<version>.<Service>/<Method> -> <Method>
    std::set<std::string> names;
    for (const auto& path : g.read_only_methods()) names.insert(path.substr(path.rfind('/') + 1));
    EXPECT_EQ(names, kReadOnly.at(g.name())) << "group " << g.name();
  }
  EXPECT_EQ(host.Stop(), 0);
}

}  // namespace
}  // namespace csi_proxy::testing

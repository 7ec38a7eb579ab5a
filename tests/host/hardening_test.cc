// What a red-team pass found at the host's door, each tried through the real socket: a flood of idle connections
// never locks other callers out (connections are capped in all and per uid within the open-file limit, and the
// host never spins when it runs out of descriptors); oversized requests and handlers' long messages cost little;
// files a non-root user could change are never loaded.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "grpc_client.h"
#include "host_process.h"
#include "v1/echo.pb.h"

namespace csi_proxy::testing {
namespace {

namespace fs = std::filesystem;

int ConnectTo(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return fd;
  if (fd >= 0) close(fd);
  return -1;
}

// Forks a process that, as `uid`, opens `count` idle connections to `path`, reports how many it opened on a pipe,
// and holds them until killed.
pid_t Flood(const std::string& path, uid_t uid, int count, int* opened) {
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    if (setgid(uid) != 0 || setuid(uid) != 0) _exit(1);
    int n = 0;
    for (int i = 0; i < count; ++i) n += ConnectTo(path) >= 0 ? 1 : 0;
    if (write(report[1], &n, sizeof n) != sizeof n) _exit(1);
    pause();
    _exit(0);
  }
  close(report[1]);
  *opened = -1;
  if (read(report[0], opened, sizeof *opened) != sizeof *opened) *opened = -1;
  close(report[0]);
  return pid;
}

TEST(ConnectionFlood, IdleConnectionsOfOneCallerDoNotLockOthersOut) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to flood as another uid";
  rlimit mine{};
  getrlimit(RLIMIT_NOFILE, &mine);
  if (mine.rlim_max < 2048)
    GTEST_SKIP() << "needs an open-file hard limit of at least 2048 (have " << mine.rlim_max << ")";
  mine.rlim_cur = mine.rlim_max;
  setrlimit(RLIMIT_NOFILE, &mine);  // the flooding child inherits it

  // The host runs with systemd's default limit of 1024 descriptors, soft and hard, so it cannot raise it.
  HostOptions options;
  options.launcher = {"/usr/bin/prlimit", "--nofile=1024:1024", "--"};
  HostProcess host("[groups.echo]\n", "socket_mode = \"0666\"\n", options);
  ASSERT_EQ(chmod(host.dir().c_str(), 0755), 0);  // let the other uid reach the socket
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1"})) << host.error();
  std::string endpoint = host.endpoint("csi-proxy-echo-v1");

  int opened = 0;
  pid_t flood = Flood(endpoint, 65534, 1100, &opened);
  ASSERT_GT(flood, 0);
  EXPECT_GT(opened, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the host takes in (or turns away) the flood

  // Another caller is still served, and promptly.
  v1::EchoRequest req;
  req.set_text("still here");
  v1::EchoResponse resp;
  auto begin = std::chrono::steady_clock::now();
  auto status = Call(Dial(endpoint), "/v1.Echo/Echo", req, &resp, std::chrono::seconds(5));
  EXPECT_TRUE(status.ok()) << status.error_message() << "\n" << host.log();
  EXPECT_EQ(resp.text(), "still here");
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(2));
  EXPECT_NE(host.log().find("uid 65534 holds its maximum of"), std::string::npos) << host.log();

  kill(flood, SIGKILL);
  waitpid(flood, nullptr, 0);
  EXPECT_EQ(host.Stop(), 0);
}

TEST(SecondInstance, StopsBeforeAnyGroupsInitWhenTheSocketsOrTheStateDirectoryAreTaken) {
  HostProcess first("[groups.echo]\n");
  ASSERT_TRUE(first.Start({"csi-proxy-echo-v1"})) << first.error();
  // The same sockets: refused before any library is even loaded.
  HostProcess same_sockets("[groups.echo]\n", "endpoint_dir = \"" + first.endpoint_dir() + "\"\n");
  EXPECT_EQ(same_sockets.RunToExit({}), 1);
  EXPECT_NE(same_sockets.log().find("is busy: another process is serving it"), std::string::npos) << same_sockets.log();
  EXPECT_EQ(same_sockets.log().find("echo group ready"), std::string::npos) << same_sockets.log();
  // Other sockets but the same state directory (where groups keep iSCSI portals and SMB mounts): refused too.
  HostProcess same_state("[groups.echo]\n", "state_dir = \"" + first.dir() + "/state\"\n");
  EXPECT_EQ(same_state.RunToExit({}), 1);
  EXPECT_NE(same_state.log().find("another csi-proxy uses the state directory " + first.dir() + "/state"),
            std::string::npos)
      << same_state.log();
  EXPECT_EQ(same_state.log().find("echo group ready"), std::string::npos) << same_state.log();
  // The first host never noticed.
  v1::EchoRequest req;
  req.set_text("x");
  v1::EchoResponse resp;
  EXPECT_TRUE(Call(Dial(first.endpoint("csi-proxy-echo-v1")), "/v1.Echo/Echo", req, &resp).ok());
  EXPECT_EQ(first.Stop(), 0);
}

TEST(RequestSize, ARequestLargerThanTheGroupAcceptsIsRefusedAndCostsNoLogVolume) {
  HostProcess host("[groups.echo]\n");
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1"})) << host.error();
  auto echo = Dial(host.endpoint("csi-proxy-echo-v1"));
  v1::EchoRequest req;
  req.set_text(std::string(1 << 20, 'x'));  // 1 MiB; the default limit is 64 KiB
  v1::EchoResponse resp;
  auto s = Call(echo, "/v1.Echo/Echo", req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_LT(s.error_message().size(), 1024u);
  req.set_text("small");
  EXPECT_TRUE(Call(echo, "/v1.Echo/Echo", req, &resp).ok());
  EXPECT_LT(host.log().size(), 64u * 1024);
  EXPECT_EQ(host.Stop(), 0);
}

TEST(RequestSize, AHandlersLongFailureMessageReachesClientAndLogBounded) {
  HostProcess host("[groups.echo]\nmax_request_bytes = 1048576\n");
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1"})) << host.error();
  v1::EchoRequest req;
  req.set_text(std::string(512 * 1024, 'p'));  // as if a group quoted a huge path in its error
  req.set_fail_with_code(static_cast<int>(grpc::StatusCode::NOT_FOUND));
  v1::EchoResponse resp;
  auto s = Call(Dial(host.endpoint("csi-proxy-echo-v1")), "/v1.Echo/Echo", req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_LE(s.error_message().size(), 4096u);
  EXPECT_LT(host.log().size(), 64u * 1024);
  EXPECT_EQ(host.Stop(), 0);
}

TEST(TrustedFiles, ALibraryOthersCouldReplaceIsNotLoaded) {
  HostProcess host("");
  std::string library = host.dir() + "/libcsi-proxy-echo.so";
  fs::copy_file(PluginDir() + "/libcsi-proxy-echo.so", library);
  fs::permissions(library, fs::perms::others_write, fs::perm_options::add);
  host.WriteConfig("[groups.echo]\nrequired = true\nlibrary = \"" + library + "\"\n");
  EXPECT_EQ(host.RunToExit({}), 1);
  EXPECT_NE(host.log().find("the library " + library + " is writable by its group or by others"), std::string::npos)
      << host.log();
  // For development only, the check can be turned off.
  EXPECT_EQ(host.RunToExit({"--allow-untrusted-files", "--check-config"}), 0) << host.log();
}

TEST(TrustedFiles, AConfigurationOthersCouldChangeStopsTheHost) {
  HostProcess host("[groups.echo]\n");
  fs::permissions(host.config_path(), fs::perms::group_write, fs::perm_options::add);
  EXPECT_EQ(host.RunToExit({}), 1);
  EXPECT_NE(host.log().find("the configuration file " + host.config_path() + " is writable"), std::string::npos)
      << host.log();
}

}  // namespace
}  // namespace csi_proxy::testing

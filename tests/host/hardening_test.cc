// What a red-team pass found at the host's door, each tried through the real socket: a flood of idle connections
// never locks other callers out (connections are capped in all, per uid and per endpoint within the open-file
// limit, which the host raises at start, and the host never spins when it runs out of descriptors); a client that
// never finishes the HTTP/2 handshake, or keeps a connection without calls, is closed; oversized requests and
// handlers' long messages cost little; files a non-root user could change are never loaded.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>
#include <thread>
#include <vector>

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

TEST(ConnectionFlood, CallersInNoListShareASmallPartOfTheConnections) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to flood as other uids";
  // 64 connections in all, 16 per uid: four uids alone would fill the host. Only root is listed.
  HostProcess host(
      "[groups.echo]\n",
      "socket_mode = \"0666\"\nmax_connections = 64\nallowed_uids = [0]\nhandshake_timeout_seconds = 60\n");
  ASSERT_EQ(chmod(host.dir().c_str(), 0755), 0);  // let the other uids reach the socket
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1"})) << host.error();
  std::string endpoint = host.endpoint("csi-proxy-echo-v1");
  std::vector<pid_t> floods;
  for (uid_t uid : {65531, 65532, 65533, 65534}) {
    int opened = 0;
    floods.push_back(Flood(endpoint, uid, 20, &opened));
    ASSERT_GT(floods.back(), 0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the host takes in (or turns away) the floods
  // Callers nobody listed hold an eighth of the connections together; the listed caller is served, and promptly.
  v1::EchoRequest req;
  req.set_text("listed");
  v1::EchoResponse resp;
  auto begin = std::chrono::steady_clock::now();
  auto status = Call(Dial(endpoint), "/v1.Echo/Echo", req, &resp, std::chrono::seconds(5));
  EXPECT_TRUE(status.ok()) << status.error_message() << "\n" << host.log();
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(2));
  EXPECT_NE(host.log().find("callers in no authorization list"), std::string::npos) << host.log();
  EXPECT_NE(host.log().find("hold their maximum of 8 connections"), std::string::npos) << host.log();
  for (pid_t flood : floods) {
    kill(flood, SIGKILL);
    waitpid(flood, nullptr, 0);
  }
  EXPECT_EQ(host.Stop(), 0);
}

// Waits until the host closes `fd` (end of file or reset). Returns how long that took, or nullopt if it did
// not within `limit`. Whatever the host sends first (an HTTP/2 SETTINGS frame) is read and ignored.
std::optional<std::chrono::milliseconds> WaitUntilClosed(int fd, std::chrono::milliseconds limit) {
  auto begin = std::chrono::steady_clock::now();
  for (;;) {
    auto left = limit - std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - begin);
    if (left.count() <= 0) return std::nullopt;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[256];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) {
      return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - begin);
    }
  }
}

bool SendAll(int fd, std::string_view bytes) { return write(fd, bytes.data(), bytes.size()) == ssize_t(bytes.size()); }

constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

bool EchoWorks(const std::string& endpoint, const std::string& method = "/v1.Echo/Echo") {
  v1::EchoRequest req;
  req.set_text("hello");
  v1::EchoResponse resp;
  return Call(Dial(endpoint), method, req, &resp, std::chrono::seconds(5)).ok() && resp.text() == "hello";
}

// Open sockets of a process (its connections and listeners).
int SocketsOf(pid_t pid) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    auto target = fs::read_symlink(e.path(), ec);
    if (!ec && target.string().rfind("socket:", 0) == 0) ++n;
  }
  return n;
}

TEST(ConnectionLimit, OneEndpointFullRefusesAtOnceWhileOthersServe) {
  HostProcess host("[groups.echo]\n", "max_connections_per_endpoint = 4\nhandshake_timeout_seconds = 60\n");
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1", "csi-proxy-echo-v1alpha1"})) << host.error();
  std::string full = host.endpoint("csi-proxy-echo-v1");
  // Start() probed the sockets with connections of its own: let the host see them go.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::vector<int> held;
  for (int i = 0; i < 4; ++i) held.push_back(ConnectTo(full));
  for (int fd : held) ASSERT_GE(fd, 0);
  // The fifth connection to that endpoint is closed at once, however long a handshake may take.
  int refused = ConnectTo(full);
  ASSERT_GE(refused, 0);
  auto closed = WaitUntilClosed(refused, std::chrono::seconds(5));
  ASSERT_TRUE(closed.has_value()) << host.log();
  EXPECT_LT(*closed, std::chrono::seconds(2));
  close(refused);
  EXPECT_NE(host.log().find("an endpoint holds its maximum of 4 connections"), std::string::npos) << host.log();
  // The other endpoint serves; the full one again once its connections are gone.
  EXPECT_TRUE(EchoWorks(host.endpoint("csi-proxy-echo-v1alpha1"), "/v1alpha1.Echo/Echo")) << host.log();
  for (int fd : held) close(fd);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_TRUE(EchoWorks(full)) << host.log();
  EXPECT_EQ(host.Stop(), 0);
}

TEST(HandshakeTimeout, ClientsThatNeverFinishThePrefaceAreClosedAndOthersServed) {
  HostProcess host("[groups.echo]\n", "handshake_timeout_seconds = 1\n");
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1"})) << host.error();
  std::string endpoint = host.endpoint("csi-proxy-echo-v1");
  int silent = ConnectTo(endpoint);
  int partial = ConnectTo(endpoint);
  int other_protocol = ConnectTo(endpoint);
  ASSERT_GE(silent, 0);
  ASSERT_GE(partial, 0);
  ASSERT_GE(other_protocol, 0);
  ASSERT_TRUE(SendAll(partial, kPreface.substr(0, 10)));
  ASSERT_TRUE(SendAll(other_protocol, "GET / HTTP/1.1\r\n\r\n"));
  // While they wait, a real client is served.
  EXPECT_TRUE(EchoWorks(endpoint)) << host.log();
  // Not HTTP/2: closed at once. Silent or stuck in the preface: closed at the timeout, not before.
  auto closed = WaitUntilClosed(other_protocol, std::chrono::seconds(5));
  ASSERT_TRUE(closed.has_value());
  EXPECT_LT(*closed, std::chrono::milliseconds(900));
  for (int fd : {silent, partial}) {
    closed = WaitUntilClosed(fd, std::chrono::seconds(10));
    ASSERT_TRUE(closed.has_value()) << "still open after 10 s\n" << host.log();
    EXPECT_LT(*closed, std::chrono::seconds(5));
    close(fd);
  }
  close(other_protocol);
  EXPECT_NE(host.log().find("no HTTP/2 client preface within 1000 ms"), std::string::npos) << host.log();
  // A connection that sends the whole preface in pieces is handed on: the host answers with its SETTINGS.
  int slow = ConnectTo(endpoint);
  ASSERT_GE(slow, 0);
  ASSERT_TRUE(SendAll(slow, kPreface.substr(0, 5)));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(SendAll(slow, kPreface.substr(5)));
  pollfd p{slow, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 5000), 1);
  char frame[9];
  ASSERT_EQ(read(slow, frame, sizeof frame), 9);
  EXPECT_EQ(frame[3], 0x4) << "the first frame of the server should be SETTINGS";
  close(slow);
  EXPECT_EQ(host.Stop(), 0);
}

TEST(IdleTimeout, AConnectionWithoutCallsIsClosedAndTheClientReconnects) {
  HostProcess host("[groups.echo]\n", "idle_timeout_seconds = 1\n");
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1"})) << host.error();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // Start()'s probes are gone
  int before = SocketsOf(host.pid());
  auto channel = Dial(host.endpoint("csi-proxy-echo-v1"));
  v1::EchoRequest req;
  req.set_text("one");
  v1::EchoResponse resp;
  ASSERT_TRUE(Call(channel, "/v1.Echo/Echo", req, &resp).ok());
  EXPECT_EQ(SocketsOf(host.pid()), before + 1);
  ASSERT_EQ(channel->GetState(false), GRPC_CHANNEL_READY);
  // Idle for longer than the timeout: the host sends GOAWAY and closes its side. A client that keeps reading its
  // connection (grpc-go always does; here, waiting on the channel's state) sees the channel leave READY.
  EXPECT_TRUE(
      channel->WaitForStateChange(GRPC_CHANNEL_READY, std::chrono::system_clock::now() + std::chrono::seconds(10)));
  EXPECT_NE(channel->GetState(false), GRPC_CHANNEL_READY);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (SocketsOf(host.pid()) > before && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(SocketsOf(host.pid()), before) << host.log();
  // The next call on the same channel connects again by itself.
  req.set_text("two");
  auto status = Call(channel, "/v1.Echo/Echo", req, &resp);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(resp.text(), "two");
  // A client that speaks just enough HTTP/2 (the preface and an empty SETTINGS frame) and then sits there is
  // closed by the host as well; it does not depend on the client closing its side after GOAWAY.
  int raw = ConnectTo(host.endpoint("csi-proxy-echo-v1"));
  ASSERT_GE(raw, 0);
  ASSERT_TRUE(SendAll(raw, kPreface));
  ASSERT_TRUE(SendAll(raw, std::string_view("\0\0\0\x04\0\0\0\0\0", 9)));
  auto closed = WaitUntilClosed(raw, std::chrono::seconds(15));
  EXPECT_TRUE(closed.has_value()) << host.log();
  close(raw);
  EXPECT_EQ(host.Stop(), 0);
}

TEST(OpenFileLimit, TheHostRaisesItsSoftLimitToTheHardLimitAtStart) {
  HostOptions options;
  options.launcher = {"/usr/bin/prlimit", "--nofile=256:2048", "--"};
  HostProcess host("[groups.echo]\n", "", options);
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1"})) << host.error();
  std::ifstream limits("/proc/" + std::to_string(host.pid()) + "/limits");
  std::string line;
  std::string soft;
  std::string hard;
  while (std::getline(limits, line)) {
    // "Max open files            2048                 2048                 files"
    if (line.rfind("Max open files", 0) == 0) std::istringstream(line.substr(14)) >> soft >> hard;
  }
  EXPECT_EQ(soft, "2048");
  EXPECT_EQ(hard, "2048");
  EXPECT_TRUE(EchoWorks(host.endpoint("csi-proxy-echo-v1")));
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

size_t Occurrences(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// A red-team pass: every failed call wrote a log line (about 4.7 MB/s from one caller). Failures are logged as
// refusals are: one line per caller, method and code every ten seconds, the next one counting those left out.
TEST(FailedCalls, ACallerWhoseCallsKeepFailingCostsOneLogLinePerMethodAndCode) {
  HostProcess host("[groups.echo]\n");
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1"})) << host.error();
  auto echo = Dial(host.endpoint("csi-proxy-echo-v1"));
  v1::EchoRequest req;
  req.set_text("no such thing");
  req.set_fail_with_code(static_cast<int>(grpc::StatusCode::NOT_FOUND));
  v1::EchoResponse resp;
  for (int i = 0; i < 200; ++i)
    EXPECT_EQ(Call(echo, "/v1.Echo/Echo", req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  req.set_fail_with_code(static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION));
  for (int i = 0; i < 200; ++i) {
    EXPECT_EQ(Call(echo, "/v1.Echo/Echo", req, &resp).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  }
  EXPECT_EQ(Occurrences(host.log(), "/v1.Echo/Echo failed with NOT_FOUND"), 1u) << host.log();
  EXPECT_EQ(Occurrences(host.log(), "/v1.Echo/Echo failed with FAILED_PRECONDITION"), 1u) << host.log();
  EXPECT_EQ(host.Stop(), 0);
}

constexpr uid_t kAttacker = 65534;  // nobody

// Forks a process that, as kAttacker, points the symlink `link` at `a` and `b` in turn (a new link renamed over
// the old one, as an attacker racing a check would) until killed.
pid_t FlipSymlinkAsAttacker(const std::string& link, const std::string& a, const std::string& b) {
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives the test
    if (setgid(kAttacker) != 0 || setuid(kAttacker) != 0) _exit(1);
    const std::string tmp = link + ".new";
    for (unsigned i = 0;; ++i) {
      unlink(tmp.c_str());
      if (symlink((i % 2 ? a : b).c_str(), tmp.c_str()) != 0 || rename(tmp.c_str(), link.c_str()) != 0) _exit(1);
    }
  }
  return pid;
}

void StopProcess(pid_t pid) {
  if (pid <= 0) return;
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

// A directory owned by kAttacker, in a directory everyone may enter.
std::string AttackerDirectory(const std::string& parent, const std::string& name) {
  fs::permissions(parent, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  std::string dir = parent + "/" + name;
  fs::create_directories(dir);
  if (chown(dir.c_str(), kAttacker, kAttacker) != 0) ADD_FAILURE() << "cannot chown " << dir;
  return dir;
}

// The mark the fixture library's constructor leaves, set in the environment the hosts inherit while it lives.
class ConstructorMark {
 public:
  explicit ConstructorMark(std::string path) : path_(std::move(path)) {
    setenv("CSI_PROXY_TEST_CONSTRUCTOR_MARK", path_.c_str(), 1);
  }
  ~ConstructorMark() { unsetenv("CSI_PROXY_TEST_CONSTRUCTOR_MARK"); }
  bool left() const { return fs::exists(path_); }

 private:
  std::string path_;
};

TEST(TrustedFiles, AUserWhoFlipsASymlinkOnTheLibrarysPathNeverGetsTheirCodeRun) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to act as another user";
  HostProcess host("");
  const std::string good = host.dir() + "/good";
  fs::create_directories(good);
  fs::copy_file(PluginDir() + "/libcsi-proxy-echo.so", good + "/libcsi-proxy-echo.so");
  // The attacker owns a directory on the configured path and flips a link in it between the real library and
  // their own, whose constructor would run as root the moment it is loaded.
  const std::string attacker = AttackerDirectory(host.dir(), "attacker");
  const std::string evil = attacker + "/evil";
  fs::create_directories(evil);
  fs::copy_file(BuildDir() + "/tests/fixtures/libcsi-proxy-ctormark.so", evil + "/libcsi-proxy-echo.so");
  ConstructorMark mark(host.dir() + "/constructor-ran");
  const std::string link = attacker + "/current";
  fs::create_directory_symlink(good, link);
  host.WriteConfig("[groups.echo]\nrequired = true\nlibrary = \"" + link + "/libcsi-proxy-echo.so\"\n");

  pid_t flipper = FlipSymlinkAsAttacker(link, good, evil);
  ASSERT_GT(flipper, 0);
  int runs = 0, refused = 0;
  for (; runs < 40 && !mark.left(); ++runs) refused += host.RunToExit({"--check-config"}) == 1 ? 1 : 0;
  StopProcess(flipper);

  EXPECT_FALSE(mark.left()) << "the attacker's library constructor ran as root after " << runs << " checks\n"
                            << host.log();
  EXPECT_EQ(refused, runs) << host.log();
  EXPECT_NE(host.log().find("lies in " + attacker + ", which is owned by uid 65534"), std::string::npos) << host.log();
}

TEST(TrustedFiles, AUserWhoFlipsASymlinkOnTheConfigurationsPathNeverGetsItRead) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to act as another user";
  HostProcess host("");
  // Two configurations that differ in what they serve: the admin's serves echo v1, the attacker's v1alpha1.
  const std::string good = host.dir() + "/good";
  const std::string attacker = AttackerDirectory(host.dir(), "attacker");
  const std::string evil = attacker + "/evil";
  fs::create_directories(good);
  fs::create_directories(evil);
  host.WriteConfig("[groups.echo]\nversions = [\"v1\"]\n");
  fs::copy_file(host.config_path(), good + "/csi-proxy.toml");
  host.WriteConfig("[groups.echo]\nversions = [\"v1alpha1\"]\n");
  fs::copy_file(host.config_path(), evil + "/csi-proxy.toml");
  const std::string link = attacker + "/current";
  fs::create_directory_symlink(good, link);
  // The host's --config is a link (in the admin's directory) to a path through the attacker's directory.
  fs::remove(host.config_path());
  fs::create_symlink(link + "/csi-proxy.toml", host.config_path());

  pid_t flipper = FlipSymlinkAsAttacker(link, good, evil);
  ASSERT_GT(flipper, 0);
  int refused = 0;
  constexpr int kRuns = 40;
  for (int run = 0; run < kRuns; ++run) refused += host.RunToExit({"--check-config"}) == 1 ? 1 : 0;
  StopProcess(flipper);

  EXPECT_EQ(host.log().find("csi-proxy-echo-v1alpha1"), std::string::npos) << "root read the attacker's configuration\n"
                                                                           << host.log();
  EXPECT_EQ(refused, kRuns) << host.log();
  EXPECT_NE(host.log().find("the configuration file " + host.config_path() + " lies in " + attacker +
                            ", which is owned by uid 65534"),
            std::string::npos)
      << host.log();
}

TEST(TrustedFiles, ALibraryReachedThroughLinksInTrustedDirectoriesLoads) {
  HostProcess host("");
  const std::string real = host.dir() + "/lib/csi-proxy";
  fs::create_directories(real);
  fs::copy_file(PluginDir() + "/libcsi-proxy-echo.so", real + "/libcsi-proxy-echo.so");
  // As /lib leads to /usr/lib on a merged-/usr system: a relative link, then "..".
  fs::create_directory_symlink("lib/csi-proxy", host.dir() + "/plugins");
  host.WriteConfig("[groups.echo]\nrequired = true\nlibrary = \"" + host.dir() +
                   "/plugins/../csi-proxy/libcsi-proxy-echo.so\"\n");
  EXPECT_EQ(host.RunToExit({"--check-config"}), 0) << host.log();
}

// csi-proxyctl check-config beside a live host broke a live iSCSI portal write: the check's init took the write's
// temporary file for a crash's leftover and removed it, and restricted the directory again. A check changes no
// state: the groups' inits are told it is one (CSI_PROXY_INIT_CHECK_ONLY).
TEST(CheckConfig, ACheckBesideALiveHostLeavesItsStateAlone) {
  HostProcess live("");
  const std::string state = live.dir() + "/state";
  const std::string groups = "[groups.iscsi]\nrequired = true\n";
  live.WriteConfig(groups, "state_dir = \"" + state + "\"\n");
  ASSERT_TRUE(live.Start({"csi-proxy-iscsi-v1alpha2"})) << live.error();
  // The live host is writing its portals: the new file is there under its temporary name, not renamed yet.
  const std::string in_progress = state + "/iscsi/.portals.tmp.4242";
  { std::ofstream(in_progress) << "# csi-proxy iSCSI target portals (address port), format 1\n"; }
  fs::permissions(state + "/iscsi", fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
  const auto mode_before = fs::status(state + "/iscsi").permissions();

  HostProcess check("");
  check.WriteConfig(groups, "state_dir = \"" + state + "\"\n");
  EXPECT_EQ(check.RunToExit({"--check-config"}), 0) << check.log();

  EXPECT_TRUE(fs::exists(in_progress)) << "the check removed the live host's write in progress\n" << check.log();
  EXPECT_EQ(fs::status(state + "/iscsi").permissions(), mode_before);
  // A check against a state directory that does not exist yet creates none of it.
  HostProcess fresh("");
  fresh.WriteConfig("[groups.iscsi]\nrequired = true\n[groups.smb]\n", "state_dir = \"" + fresh.dir() + "/state\"\n");
  EXPECT_EQ(fresh.RunToExit({"--check-config"}), 0) << fresh.log();
  EXPECT_FALSE(fs::exists(fresh.dir() + "/state")) << fresh.log();
  EXPECT_TRUE(live.running());
  EXPECT_EQ(live.Stop(), 0);
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

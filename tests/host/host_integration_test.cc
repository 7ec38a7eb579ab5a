// The real host, the real example group library, a real gRPC client over the real Unix sockets.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "grpc_client.h"
#include "host_process.h"
#include "v1/echo.pb.h"
#include "v1alpha1/echo.pb.h"

namespace csi_proxy::testing {
namespace {

namespace fs = std::filesystem;

const char* kEchoGroup = "[groups.echo]\nenabled = true\ngreeting = \"hello from the config\"\n";

v1::EchoRequest EchoReq(const std::string& text, uint32_t delay_ms = 0) {
  v1::EchoRequest r;
  r.set_text(text);
  r.set_delay_ms(delay_ms);
  return r;
}

class EchoHost : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(host_.Start({"csi-proxy-echo-v1", "csi-proxy-echo-v1alpha1"})) << host_.error();
    v1_ = Dial(host_.endpoint("csi-proxy-echo-v1"));
    v1alpha1_ = Dial(host_.endpoint("csi-proxy-echo-v1alpha1"));
  }

  HostProcess host_{kEchoGroup};
  std::shared_ptr<grpc::Channel> v1_;
  std::shared_ptr<grpc::Channel> v1alpha1_;
};

TEST_F(EchoHost, ServesOneSocketPerGroupAndVersionWithTheConfiguredMode) {
  for (const char* name : {"csi-proxy-echo-v1", "csi-proxy-echo-v1alpha1"}) {
    struct stat st {};
    ASSERT_EQ(stat(host_.endpoint(name).c_str(), &st), 0) << name;
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0660u) << name;
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(host_.endpoint_dir()), fs::directory_iterator()), 2);
}

TEST_F(EchoHost, RoutesEachCallByItsMethodPath) {
  v1::EchoResponse resp;
  ASSERT_TRUE(Call(v1_, "/v1.Echo/Echo", EchoReq("ping"), &resp).ok());
  EXPECT_EQ(resp.text(), "ping");

  v1alpha1::EchoRequest old_req;
  old_req.set_text("old ping");
  v1alpha1::EchoResponse old_resp;
  ASSERT_TRUE(Call(v1alpha1_, "/v1alpha1.Echo/Echo", old_req, &old_resp).ok());
  EXPECT_EQ(old_resp.text(), "old ping");
}

TEST_F(EchoHost, UnknownMethodsAreUnimplemented) {
  v1::EchoResponse resp;
  auto s = Call(v1_, "/v1.Echo/NoSuchMethod", EchoReq("x"), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_NE(s.error_message().find("/v1.Echo/NoSuchMethod"), std::string::npos);
  // A method of another version's endpoint is not served here.
  EXPECT_EQ(Call(v1alpha1_, "/v1.Echo/Echo", EchoReq("x"), &resp).error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(Call(v1alpha1_, "/v1alpha1.Echo/Sleep", EchoReq("x"), &resp).error_code(), grpc::StatusCode::UNIMPLEMENTED);
}

TEST_F(EchoHost, HandlerStatusReachesTheClientWithItsCodeAndMessage) {
  auto req = EchoReq("volume /dev/sdz not found");
  req.set_fail_with_code(static_cast<int>(grpc::StatusCode::NOT_FOUND));
  v1::EchoResponse resp;
  auto s = Call(v1_, "/v1.Echo/Echo", req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message(), "volume /dev/sdz not found");
}

TEST_F(EchoHost, ThrowingHandlerFailsWithInternalAndTheHostKeepsServing) {
  auto req = EchoReq("x");
  req.set_throw_exception(true);
  v1::EchoResponse resp;
  auto s = Call(v1_, "/v1.Echo/Echo", req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_NE(s.error_message().find("asked to throw"), std::string::npos);
  EXPECT_TRUE(Call(v1_, "/v1.Echo/Echo", EchoReq("still here"), &resp).ok());
}

TEST_F(EchoHost, MalformedRequestBytesAreInvalidArgumentAndTheHostKeepsServing) {
  std::string out;
  auto s = CallRaw(v1_, "/v1.Echo/Echo", std::string("\xff\xff\xff\xff\x0f garbage", 13), &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::EchoResponse resp;
  EXPECT_TRUE(Call(v1_, "/v1.Echo/Echo", EchoReq("ok"), &resp).ok());
}

TEST_F(EchoHost, AHandlerMayCompleteLaterFromAnotherThread) {
  v1::EchoResponse resp;
  ASSERT_TRUE(Call(v1_, "/v1.Echo/EchoLater", EchoReq("later", 100), &resp).ok());
  EXPECT_EQ(resp.text(), "later");
}

TEST_F(EchoHost, ManyClientsCallConcurrently) {
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 32; ++c) {
    clients.emplace_back([&, c] {
      auto channel = Dial(host_.endpoint("csi-proxy-echo-v1"));  // one connection per client
      for (int i = 0; i < 20; ++i) {
        std::string text = "client " + std::to_string(c) + " call " + std::to_string(i);
        v1::EchoResponse resp;
        const char* method = i % 2 ? "/v1.Echo/Echo" : "/v1.Echo/EchoLater";
        if (Call(channel, method, EchoReq(text, 1), &resp).ok() && resp.text() == text) ++ok;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 32 * 20);
}

TEST_F(EchoHost, CallsPastTheirDeadlineFailAndTheHandlerSeesTheCancellation) {
  v1::EchoResponse resp;
  auto s = Call(v1_, "/v1.Echo/Sleep", EchoReq("slow", 3000), &resp, std::chrono::milliseconds(200));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  // The host stays usable, and the handler learns the client's deadline.
  v1::WhoAmIResponse who;
  auto before = std::chrono::system_clock::now();
  ASSERT_TRUE(Call(v1_, "/v1.Echo/WhoAmI", v1::WhoAmIRequest(), &who, std::chrono::seconds(30)).ok());
  auto deadline = std::chrono::system_clock::time_point(std::chrono::nanoseconds(who.deadline_unix_ns()));
  EXPECT_GT(deadline, before + std::chrono::seconds(25));
  EXPECT_LT(deadline, before + std::chrono::seconds(35));
}

TEST_F(EchoHost, HandlersSeeThePeerCredentialsAndTheGroupConfiguration) {
  v1::WhoAmIResponse who;
  ASSERT_TRUE(Call(v1_, "/v1.Echo/WhoAmI", v1::WhoAmIRequest(), &who).ok());
  EXPECT_EQ(who.pid(), getpid());
  EXPECT_EQ(who.uid(), static_cast<int64_t>(getuid()));
  EXPECT_EQ(who.gid(), static_cast<int64_t>(getgid()));
  EXPECT_EQ(who.greeting(), "hello from the config");
  EXPECT_EQ(who.kubelet_path(), host_.kubelet_dir());
}

TEST_F(EchoHost, GracefulShutdownLetsTheCallInFlightFinishAndRemovesTheSockets) {
  grpc::Status in_flight;
  v1::EchoResponse resp;
  std::thread caller([&] { in_flight = Call(v1_, "/v1.Echo/Sleep", EchoReq("finished", 1500), &resp); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let the call reach the handler
  EXPECT_EQ(host_.Stop(), 0);
  caller.join();
  EXPECT_TRUE(in_flight.ok()) << in_flight.error_message();
  EXPECT_EQ(resp.text(), "finished");
  EXPECT_FALSE(resp.saw_cancellation());
  EXPECT_FALSE(fs::exists(host_.endpoint("csi-proxy-echo-v1")));
  EXPECT_FALSE(fs::exists(host_.endpoint("csi-proxy-echo-v1alpha1")));
  EXPECT_NE(host_.log().find("stopped"), std::string::npos);
}

TEST(HostSockets, AStaleSocketFromACrashedRunIsReplaced) {
  HostProcess host(kEchoGroup);
  {
    // What a killed host leaves behind: a socket file nobody listens on.
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::string path = host.endpoint("csi-proxy-echo-v1");
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    close(fd);
  }
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1"})) << host.error();
  v1::EchoResponse resp;
  EXPECT_TRUE(Call(Dial(host.endpoint("csi-proxy-echo-v1")), "/v1.Echo/Echo", EchoReq("x"), &resp).ok());
}

TEST(HostSockets, AKilledHostCanBeRestartedOnItsOwnLeftovers) {
  HostProcess host(kEchoGroup);
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1"})) << host.error();
  host.Kill();
  ASSERT_TRUE(fs::exists(host.endpoint("csi-proxy-echo-v1")));  // SIGKILL leaves the file
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1"})) << host.error();
}

TEST(HostSockets, ASocketServedByAnotherLiveHostIsNeverTakenOver) {
  HostProcess first(kEchoGroup);
  ASSERT_TRUE(first.Start({"csi-proxy-echo-v1"})) << first.error();
  HostProcess second(kEchoGroup, "endpoint_dir = \"" + first.endpoint_dir() + "\"\n");
  EXPECT_EQ(second.RunToExit({}), 1);
  EXPECT_NE(second.log().find("endpoint " + first.endpoint("csi-proxy-echo-v1") + " is busy"), std::string::npos)
      << second.log();
  v1::EchoResponse resp;
  EXPECT_TRUE(Call(Dial(first.endpoint("csi-proxy-echo-v1")), "/v1.Echo/Echo", EchoReq("x"), &resp).ok());
}

TEST(HostSockets, ModeAndGroupComeFromTheConfiguration) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give the socket files another group";
  HostProcess host(kEchoGroup, "socket_mode = \"0640\"\nsocket_group = \"4242\"\n");
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1"})) << host.error();
  struct stat st {};
  ASSERT_EQ(stat(host.endpoint("csi-proxy-echo-v1").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  EXPECT_EQ(st.st_gid, 4242u);
}

TEST(HostSockets, SigintStopsTheHostCleanly) {
  HostProcess host(kEchoGroup);
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1"})) << host.error();
  kill(host.pid(), SIGINT);
  for (int i = 0; i < 500 && fs::exists(host.endpoint("csi-proxy-echo-v1")); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(host.Stop(), 0);  // already stopping; Stop() collects the exit code
  EXPECT_NE(host.log().find("received SIGINT"), std::string::npos);
  EXPECT_FALSE(fs::exists(host.endpoint("csi-proxy-echo-v1")));
}

TEST(HostGroups, ADisabledGroupIsNotServed) {
  HostProcess host("[groups.echo]\nenabled = false\n[groups.twin]\nenabled = true\nlibrary = \"" + BuildDir() +
                   "/tests/fixtures/libcsi-proxy-twin.so\"\n");
  ASSERT_TRUE(host.Start({"csi-proxy-twin-v1"})) << host.error();
  EXPECT_FALSE(fs::exists(host.endpoint("csi-proxy-echo-v1")));
  EXPECT_NE(host.log().find("group 'echo' is disabled"), std::string::npos);
}

TEST(HostGroups, OnlyTheConfiguredVersionsAreServed) {
  HostProcess host("[groups.echo]\nversions = [\"v1alpha1\"]\n");
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1alpha1"})) << host.error();
  EXPECT_FALSE(fs::exists(host.endpoint("csi-proxy-echo-v1")));
}

TEST(HostGroups, AnUnofferedVersionInTheConfigIsRefused) {
  HostProcess host("[groups.echo]\nrequired = true\nversions = [\"v2\"]\n");
  EXPECT_EQ(host.RunToExit({}), 1);
  EXPECT_NE(host.log().find("versions lists 'v2', which the library does not serve"), std::string::npos);
}

TEST(HostGroups, TwoLibrariesWithTheSameProtoNamesLoadSideBySide) {
  HostProcess host(std::string(kEchoGroup) + "[groups.twin]\nlibrary = \"" + BuildDir() +
                   "/tests/fixtures/libcsi-proxy-twin.so\"\n");
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1", "csi-proxy-twin-v1"})) << host.error();
  v1::EchoResponse resp;
  ASSERT_TRUE(Call(Dial(host.endpoint("csi-proxy-twin-v1")), "/v1.Twin/Echo", EchoReq("a"), &resp).ok());
  EXPECT_EQ(resp.text(), "twin:a");
  ASSERT_TRUE(Call(Dial(host.endpoint("csi-proxy-echo-v1")), "/v1.Echo/Echo", EchoReq("b"), &resp).ok());
  EXPECT_EQ(resp.text(), "b");
}

TEST(HostCommandLine, CheckConfigPrintsWhatWouldBeServed) {
  HostProcess host(kEchoGroup);
  EXPECT_EQ(host.RunToExit({"--check-config"}), 0);
  std::string out = host.log();
  EXPECT_NE(out.find("csi-proxy-echo-v1 "), std::string::npos) << out;
  EXPECT_NE(out.find("csi-proxy-echo-v1alpha1"), std::string::npos);
  EXPECT_NE(out.find("libcsi-proxy-echo.so"), std::string::npos);
  EXPECT_TRUE(fs::is_empty(host.endpoint_dir()));  // checking serves nothing
}

TEST(HostCommandLine, CheckConfigSaysWhetherAStartWouldSucceed) {
  // An optional group that cannot load would be skipped: a warning, and a start would succeed.
  HostProcess optional(std::string(kEchoGroup) + "[groups.missing]\nenabled = true\n");
  EXPECT_EQ(optional.RunToExit({"--check-config"}), 0) << optional.log();
  EXPECT_NE(optional.log().find("skipped: group 'missing'"), std::string::npos) << optional.log();
  EXPECT_NE(optional.log().find("a start would serve this configuration"), std::string::npos);
  // A required one would stop the start.
  HostProcess required(std::string(kEchoGroup) + "[groups.missing]\nrequired = true\n");
  EXPECT_EQ(required.RunToExit({"--check-config"}), 1);
  EXPECT_NE(required.log().find("refused: group 'missing'"), std::string::npos) << required.log();
  EXPECT_NE(required.log().find("a start would be refused"), std::string::npos);
}

TEST(HostCommandLine, AConfigErrorNamesTheKeyAndStopsTheHost) {
  HostProcess host(kEchoGroup, "workers = 0\n");
  EXPECT_EQ(host.RunToExit({}), 1);
  EXPECT_NE(host.log().find("host.workers must be an integer from 1 to 1024"), std::string::npos) << host.log();
}

TEST(HostCommandLine, VersionAndHelpExitZero) {
  HostProcess host(kEchoGroup);
  EXPECT_EQ(host.RunToExit({"--version"}), 0);
  EXPECT_NE(host.log().find("csi-proxy "), std::string::npos);
  EXPECT_EQ(host.RunToExit({"--help"}), 0);
  EXPECT_NE(host.log().find("--check-config"), std::string::npos);
  EXPECT_EQ(host.RunToExit({"--bogus"}), 2);
}

TEST(HostCommandLine, LogLevelFlagOverridesTheConfig) {
  HostProcess host(kEchoGroup, "log_level = \"error\"\n");
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1"})) << host.error();
  EXPECT_EQ(host.log().find("ready"), std::string::npos);  // info lines are filtered at level error
  host.Stop();
  HostProcess verbose(kEchoGroup, "log_level = \"error\"\n");
  EXPECT_EQ(verbose.RunToExit({"--log-level", "info", "--check-config"}), 0);
  EXPECT_NE(verbose.log().find("group 'echo' loaded"), std::string::npos);
}

}  // namespace
}  // namespace csi_proxy::testing

// What an operator sees of a running host, tried from outside as an operator's tools would: the Prometheus
// exposition scraped over HTTP after known calls, and the standard health and reflection services asked by a
// Python grpcio client (tests/host/grpc_std_client.py) that shares no code with the host.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <sstream>
#include <thread>

#include "build_tree.h"
#include "grpc_client.h"
#include "host_process.h"
#include "loopback_port.h"
#include "metrics_scrape.h"
#include "run_program.h"
#include "v1/echo.pb.h"
#include "v1/filesystem.pb.h"

namespace csi_proxy::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

constexpr const char* kFilesystem = "csi-proxy-filesystem-v1";
constexpr const char* kBlocker = "csi-proxy-blocker-v1";
constexpr const char* kPython = "/usr/bin/python3";  // Debian's, where python3-grpcio is installed

std::string BlockerGroup(const std::string& tag) {
  return "[groups.blocker]\nlibrary = \"" + BuildDir() + "/tests/fixtures/libcsi-proxy-blocker1.so\"\ntag = \"" + tag +
         "\"\n";
}
const std::string kFilesystemGroup = "[groups.filesystem]\nrequired = true\n";

std::map<std::string, std::string> Method(const std::string& method) {
  return {{"grpc_type", "unary"}, {"grpc_service", "v1.Filesystem"}, {"grpc_method", method}};
}

// Runs the Python client; its output, or the failure with the output in the message.
std::string Python(const std::string& socket, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {kPython, csi_proxy::testing::SourceDir() + "/tests/host/grpc_std_client.py",
                                   BuildDir() + "/share/grpc_std.protoset", socket};
  argv.insert(argv.end(), args.begin(), args.end());
  common::ProgramOptions options;
  options.timeout = std::chrono::seconds(60);
  options.cancelled = [] { return false; };
  auto result = common::RunProgram(argv, options);
  if (!result.ok()) return "run failed: " + result.status().message();
  if (result->exit_code != 0) return "exit " + std::to_string(result->exit_code) + ": " + result->output;
  return result->output;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

class Observability : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(host_.kubelet_dir() + "/pod");
    ASSERT_NE(port_, 0);
    ASSERT_TRUE(host_.Start({kFilesystem, kBlocker})) << host_.error();
  }

  std::string Metrics() { return Scrape(port_); }

  grpc::Status PathExists(const std::string& path) {
    v1::PathExistsRequest req;
    req.set_path(path);
    v1::PathExistsResponse resp;
    return Call(Dial(host_.endpoint(kFilesystem)), "/v1.Filesystem/PathExists", req, &resp);
  }

  // Waits until the scraped `name{labels}` equals `want`.
  bool WaitForValue(const std::string& name, const std::map<std::string, std::string>& labels, double want) {
    for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
         std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(milliseconds(20))) {
      if (Value(Metrics(), name, labels) == want) return true;
    }
    return false;
  }

  uint16_t port_ = test_support::FreeLoopbackPort();
  HostProcess host_{kFilesystemGroup + BlockerGroup("a"),
                    "metrics_address = \"127.0.0.1:" + std::to_string(port_) + "\"\nshutdown_timeout_seconds = 20\n"};
};

TEST_F(Observability, MetricsCountKnownCallsWithUpstreamNamesAndLabels) {
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(PathExists(host_.kubelet_dir() + "/pod").ok());
  ASSERT_EQ(PathExists("/etc").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  std::string raw;
  ASSERT_EQ(CallRaw(Dial(host_.endpoint(kFilesystem)), "/v1.Filesystem/NoSuchMethod", "", &raw).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);

  std::string m = Metrics();
  ASSERT_FALSE(m.empty());
  EXPECT_EQ(Value(m, "grpc_server_started_total", Method("PathExists")), 4) << m;
  EXPECT_EQ(Value(m, "grpc_server_msg_received_total", Method("PathExists")), 4);
  EXPECT_EQ(Value(m, "grpc_server_msg_sent_total", Method("PathExists")), 3);
  auto handled = Method("PathExists");
  handled["grpc_code"] = "OK";
  EXPECT_EQ(Value(m, "grpc_server_handled_total", handled), 3);
  handled["grpc_code"] = "PermissionDenied";
  EXPECT_EQ(Value(m, "grpc_server_handled_total", handled), 1);
  handled["grpc_code"] = "NotFound";  // a code that did not happen has no series
  EXPECT_TRUE(std::isnan(Value(m, "grpc_server_handled_total", handled)));
  EXPECT_EQ(Value(m, "grpc_server_handling_seconds_count", Method("PathExists")), 4);
  auto bucket = Method("PathExists");
  bucket["le"] = "+Inf";
  EXPECT_EQ(Value(m, "grpc_server_handling_seconds_bucket", bucket), 4);
  bucket["le"] = "120";
  EXPECT_EQ(Value(m, "grpc_server_handling_seconds_bucket", bucket), 4);
  // Methods not called yet have their series at zero; an unknown path gets none, only the endpoint's count.
  EXPECT_EQ(Value(m, "grpc_server_started_total", Method("Mkdir")), 0);
  EXPECT_EQ(m.find("NoSuchMethod"), std::string::npos);
  EXPECT_EQ(Value(m, "csi_proxy_unknown_method_calls_total", {{"endpoint", kFilesystem}}), 1);

  EXPECT_EQ(Value(m, "csi_proxy_build_info", {{"version", CSI_PROXY_VERSION_FOR_TESTS}}), 1);
  EXPECT_EQ(Value(m, "csi_proxy_group_info",
                  {{"group", "filesystem"},
                   {"api_group", "filesystem"},
                   {"version", "v1"},
                   {"endpoint", kFilesystem},
                   {"library", PluginDir() + "/libcsi-proxy-filesystem.so"},
                   {"plugin_version", CSI_PROXY_VERSION_FOR_TESTS},
                   {"abi_version", "2"}}),
            1)
      << m;
  EXPECT_EQ(Value(m, "csi_proxy_group_state", {{"group", "filesystem"}, {"state", "serving"}}), 1);
  EXPECT_EQ(Value(m, "csi_proxy_group_state", {{"group", "filesystem"}, {"state", "draining"}}), 0);
  EXPECT_EQ(Value(m, "csi_proxy_group_calls_in_flight", {{"group", "filesystem"}}), 0);
  EXPECT_EQ(Value(m, "csi_proxy_group_workers_busy", {{"group", "filesystem"}}), 0);
  EXPECT_EQ(Value(m, "csi_proxy_group_workers", {{"group", "filesystem"}}), 16);
  EXPECT_EQ(Value(m, "csi_proxy_group_refused_total", {{"group", "filesystem"}}), 0);
  EXPECT_EQ(Value(m, "csi_proxy_reloads_total", {{"result", "ok"}}), 0);
}

TEST_F(Observability, ReflectionListsAndDescribesFromTheLibrarysDescriptors) {
  for (const char* version : {"v1alpha", "v1"}) {
    std::string services = Python(host_.endpoint(kFilesystem), {"list", version});
    EXPECT_EQ(services,
              "v1.Filesystem\ngrpc.health.v1.Health\ngrpc.reflection.v1alpha.ServerReflection\n"
              "grpc.reflection.v1.ServerReflection\n")
        << version;
    std::string method = Python(host_.endpoint(kFilesystem), {"describe", "v1.Filesystem.PathExists", version});
    EXPECT_EQ(method.substr(0, method.find('\n')),
              "v1.Filesystem.PathExists v1.PathExistsRequest v1.PathExistsResponse")
        << method;
    EXPECT_NE(method.find("field path 1 9"), std::string::npos) << method;  // string path = 1
  }
  // The host's own services are described too.
  EXPECT_EQ(
      Python(host_.endpoint(kFilesystem), {"describe", "grpc.health.v1.Health.Check"})
          .rfind("grpc.health.v1.Health.Check grpc.health.v1.HealthCheckRequest grpc.health.v1.HealthCheckResponse\n",
                 0),
      0u);
}

TEST(ObservabilityVersion1, ALibraryWithoutDescriptorsIsListedButNotDescribed) {
  HostProcess host("[groups.version1]\nlibrary = \"" + BuildDir() + "/tests/fixtures/libcsi-proxy-version1.so\"\n");
  ASSERT_TRUE(host.Start({"csi-proxy-version1-v1"})) << host.error();
  std::string socket = host.endpoint("csi-proxy-version1-v1");
  EXPECT_EQ(Python(socket, {"list"}).rfind("v1.Echo\ngrpc.health.v1.Health\n", 0), 0u);
  std::string described = Python(socket, {"describe", "v1.Echo.Echo"});
  EXPECT_NE(described.find("no descriptor for v1.Echo: no symbol v1.Echo (the library of this endpoint gives no "
                           "descriptors)"),
            std::string::npos)
      << described;
  EXPECT_EQ(Python(socket, {"check", "v1.Echo"}), "SERVING\n");
}

TEST_F(Observability, HealthIsNotServingWhileAGroupReloadsAndDrains) {
  EXPECT_EQ(Python(host_.endpoint(kFilesystem), {"check", ""}), "SERVING\n");
  EXPECT_EQ(Python(host_.endpoint(kFilesystem), {"check", "v1.Filesystem"}), "SERVING\n");
  EXPECT_EQ(Python(host_.endpoint(kFilesystem), {"check", "v1.NoSuchService"}), "NOT_FOUND\n");
  EXPECT_EQ(Python(host_.endpoint(kBlocker), {"check", "v1.Blocker"}), "SERVING\n");

  // A call the old instance is busy with keeps the reload draining for a while.
  std::string seen = host_.dir() + "/watch.out";
  auto watch = std::async(std::launch::async, [&] {
    return Python(host_.endpoint(kBlocker), {"watch", "", "3", seen});
  });
  for (int i = 0; i < 2000 && ReadAll(seen).empty(); ++i) std::this_thread::sleep_for(milliseconds(10));
  ASSERT_EQ(ReadAll(seen), "SERVING\n");  // the watch is established
  auto blocked = std::async(std::launch::async, [&] {
    v1::EchoResponse resp;
    v1::EchoRequest req;
    req.set_delay_ms(6000);  // time enough for the checks below, even on a slow machine
    return Call(Dial(host_.endpoint(kBlocker)), "/v1.Blocker/Block", req, &resp);
  });
  ASSERT_TRUE(WaitForValue("csi_proxy_group_calls_in_flight", {{"group", "blocker"}}, 1)) << Metrics();
  host_.WriteConfig(kFilesystemGroup + BlockerGroup("b"),
                    "metrics_address = \"127.0.0.1:" + std::to_string(port_) + "\"\nshutdown_timeout_seconds = 20\n");
  auto reloaded = std::async(std::launch::async, [&] { return host_.Reload(); });

  ASSERT_TRUE(WaitForValue("csi_proxy_group_state", {{"group", "blocker"}, {"state", "reloading"}}, 1)) << Metrics();
  EXPECT_EQ(Python(host_.endpoint(kBlocker), {"check", ""}), "NOT_SERVING\n");
  EXPECT_EQ(Python(host_.endpoint(kBlocker), {"check", "v1.Blocker"}), "NOT_SERVING\n");
  EXPECT_EQ(Python(host_.endpoint(kFilesystem), {"check", ""}), "SERVING\n");  // the other group is untouched

  EXPECT_TRUE(blocked.get().ok());
  ASSERT_TRUE(reloaded.get()) << host_.log();
  EXPECT_EQ(Python(host_.endpoint(kBlocker), {"check", "v1.Blocker"}), "SERVING\n");
  EXPECT_EQ(watch.get(), "SERVING\nNOT_SERVING\nSERVING\n");
  std::string m = Metrics();
  EXPECT_EQ(Value(m, "csi_proxy_reloads_total", {{"result", "ok"}}), 1) << m;
  EXPECT_EQ(Value(m, "csi_proxy_group_state", {{"group", "blocker"}, {"state", "serving"}}), 1) << m;
}

TEST(ObservabilityConfig, AMetricsAddressThatIsNotIpAndPortIsRefused) {
  for (const char* address : {"localhost:9180", "unix:/run/csi-proxy/metrics.sock", "127.0.0.1", "127.0.0.1:0x50"}) {
    HostProcess host(kFilesystemGroup, std::string("metrics_address = \"") + address + "\"\n");
    EXPECT_EQ(host.RunToExit({"--check-config"}), 1) << address << "\n" << host.log();
    EXPECT_NE(host.log().find("host.metrics_address"), std::string::npos) << host.log();
  }
}

// A red-team pass: two TCP connections that never sent a request held both of the web server's workers, and every
// scrape waited for good. Now a few idle connections take a few of the workers, and any idle connection is closed
// after the request timeout, so a scrape waits seconds at most.
TEST(MetricsServer, IdleConnectionsDelayAScrapeBySecondsAtMost) {
  const uint16_t port = test_support::FreeLoopbackPort();
  HostProcess host(kFilesystemGroup, "metrics_address = \"127.0.0.1:" + std::to_string(port) + "\"\n");
  ASSERT_TRUE(host.Start({kFilesystem})) << host.error();
  ASSERT_FALSE(Scrape(port).empty());
  auto connect_idle = [port] {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
    return fd;
  };
  std::vector<int> idle;
  for (int i = 0; i < 2; ++i) idle.push_back(connect_idle());
  auto started = std::chrono::steady_clock::now();
  EXPECT_FALSE(Scrape(port, std::chrono::seconds(10)).empty()) << "two idle connections kept the scrape waiting";
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(2));
  // More idle connections than workers: they are closed after the request timeout, and the scrape is answered.
  for (int i = 0; i < 6; ++i) idle.push_back(connect_idle());
  started = std::chrono::steady_clock::now();
  EXPECT_FALSE(Scrape(port, std::chrono::seconds(15)).empty()) << "idle connections kept the scrape waiting";
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10));
  for (int fd : idle) close(fd);
  EXPECT_EQ(host.Stop(), 0);
}

}  // namespace
}  // namespace csi_proxy::testing

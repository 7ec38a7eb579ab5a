// A third party's path: install csi-proxy and its SDK to a prefix, build the example group out of tree with
// find_package(CsiProxySdk) and one csi_proxy_add_plugin() call, run its unit test (the SDK's in-process fake host,
// csi_proxy/testing/fake_host.hpp), and have the installed host serve it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "build_tree.h"
#include "grpc_client.h"
#include "host_process.h"
#include "run_program.h"
#include "v1/echo.pb.h"

namespace csi_proxy::testing {
namespace {

namespace fs = std::filesystem;

void RunOk(const std::vector<std::string>& argv, std::string* output = nullptr) {
  auto r = common::RunProgram(argv, {.timeout = std::chrono::minutes(10)});
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->exit_code, 0) << r->output;
  if (output != nullptr) *output = r->output;
}

// The report's lines that are not a passed check.
std::string NotPassed(const std::string& report) {
  std::istringstream in(report);
  std::string lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && !line.starts_with("PASS  ")) lines += line + "\n";
  }
  return lines;
}

TEST(SdkInstall, AnOutOfTreeGroupLibraryBuiltAgainstTheInstalledSdkIsServedByTheInstalledHost) {
  TempDir work;
  const std::string prefix = work.path() + "/prefix";
  ASSERT_NO_FATAL_FAILURE(RunOk({"/usr/bin/cmake", "--install", BuildDir(), "--prefix", prefix}));

  for (const char* f :
       {"bin/csi-proxy", "bin/csi-proxy-plugin-check", "bin/csi-proxy-runner", "include/csi_proxy/plugin_abi.h",
        "include/csi_proxy/plugin.hpp", "include/csi_proxy/status.hpp", "include/csi_proxy/log.hpp",
        "include/csi_proxy/config.hpp", "include/csi_proxy/service_builder.hpp", "include/csi_proxy/entry_points.hpp",
        "include/csi_proxy/testing/fake_host.hpp", "lib/cmake/CsiProxySdk/CsiProxySdkConfig.cmake",
        "lib/cmake/CsiProxySdk/CsiProxyPlugin.cmake", "etc/csi-proxy/csi-proxy.toml"}) {
    EXPECT_TRUE(fs::exists(prefix + "/" + f)) << f;
  }
  EXPECT_FALSE(fs::exists(prefix + "/lib/csi-proxy/plugins/libcsi-proxy-echo.so"));  // examples stay out

  // Out of tree: only the installed SDK, found through CMAKE_PREFIX_PATH.
  const std::string build = work.path() + "/echo-build";
  ASSERT_NO_FATAL_FAILURE(RunOk({"/usr/bin/cmake", "-S", csi_proxy::testing::SourceDir() + "/sdk/examples/echo", "-B",
                                 build, "-DCMAKE_PREFIX_PATH=" + prefix, "-DCMAKE_BUILD_TYPE=Release"}));
  ASSERT_NO_FATAL_FAILURE(RunOk({"/usr/bin/cmake", "--build", build, "-j2"}));
  ASSERT_TRUE(fs::exists(build + "/libcsi-proxy-echo.so"));

  // Its unit test, built against the installed SDK too, calls the library through the fake host.
  std::string tested;
  ASSERT_NO_FATAL_FAILURE(RunOk({build + "/echo_plugin_test"}, &tested));
  EXPECT_NE(tested.find("[  PASSED  ] 5 tests."), std::string::npos) << tested;

  // The installed conformance kit passes it (every method: the example only answers from memory).
  const std::string check_config = work.Write("echo-check.toml", "[groups.echo]\n[check]\nfuzz_mutating = true\n");
  auto kit = common::RunProgram({prefix + "/bin/csi-proxy-plugin-check", build + "/libcsi-proxy-echo.so", "--config",
                                 check_config, "--seconds", "1"},
                                {.timeout = std::chrono::minutes(10)});
  ASSERT_TRUE(kit.ok()) << kit.status().message();
  const std::string& report = kit->output;
  // What did not pass first (a report's end is read first where only its last lines are kept), then all of it.
  EXPECT_EQ(kit->exit_code, 0) << NotPassed(report) << "\nthe whole report:\n" << report;
  EXPECT_NE(report.find("PASS  fuzz /v1.Echo/Echo:"), std::string::npos) << report;
  EXPECT_NE(report.find(" 0 failed"), std::string::npos) << report;
  // Its isolated checks find the installed runner beside it (as root: the runner's confinement needs it).
  if (geteuid() == 0) {
    EXPECT_NE(report.find("PASS  isolated: calls /v1.Echo/Echo:"), std::string::npos) << report;
    EXPECT_NE(report.find("PASS  isolated: stop:"), std::string::npos) << report;
  }

  // Dropped into the installed plugin folder, found without any plugin_dir in the config.
  fs::create_directories(prefix + "/lib/csi-proxy/plugins");
  fs::copy_file(build + "/libcsi-proxy-echo.so", prefix + "/lib/csi-proxy/plugins/libcsi-proxy-echo.so");
  HostProcess host("[groups.echo]\nenabled = true\n", "",
                   HostOptions{.binary = prefix + "/bin/csi-proxy", .write_plugin_dir = false});
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1"})) << host.error();
  v1::EchoRequest req;
  req.set_text("built out of tree");
  v1::EchoResponse resp;
  ASSERT_TRUE(Call(Dial(host.endpoint("csi-proxy-echo-v1")), "/v1.Echo/Echo", req, &resp).ok());
  EXPECT_EQ(resp.text(), "built out of tree");
  EXPECT_NE(host.log().find(prefix + "/lib/csi-proxy/plugins/libcsi-proxy-echo.so"), std::string::npos);
  EXPECT_EQ(host.Stop(), 0);
}

}  // namespace
}  // namespace csi_proxy::testing

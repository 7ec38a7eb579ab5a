// The ABI's growth rule end to end: libraries whose view of the ABI differs from this host's (larger structs of
// a later SDK, a wider version range) load through the real host and answer calls over the real socket.
#include <gtest/gtest.h>

#include <string>

#include "csi_proxy/plugin_abi.h"
#include "grpc_client.h"
#include "host_process.h"
#include "v1/echo.pb.h"

namespace csi_proxy::testing {
namespace {

std::string Fixture(const std::string& group) { return BuildDir() + "/tests/fixtures/libcsi-proxy-" + group + ".so"; }

// Starts the host with the one fixture group, calls /v1.Echo/Echo on its endpoint, and checks the load line.
void ExpectLoadsAndServes(const std::string& group, const std::string& load_line) {
  HostProcess host("[groups." + group + "]\nrequired = true\nlibrary = \"" + Fixture(group) + "\"\n");
  const std::string endpoint = "csi-proxy-" + group + "-v1";
  ASSERT_TRUE(host.Start({endpoint})) << host.error() << "\nlog:\n" << host.log();
  v1::EchoRequest req;
  req.set_text("served by " + group);
  v1::EchoResponse resp;
  grpc::Status status = Call(Dial(host.endpoint(endpoint)), "/v1.Echo/Echo", req, &resp);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(resp.text(), "served by " + group);
  EXPECT_NE(host.log().find(load_line), std::string::npos) << "expected: " << load_line << "\nlog:\n" << host.log();
  EXPECT_EQ(host.Stop(), 0);
}

TEST(AbiGrowth, ALibraryWhoseStructsAreLargerThanTheHostKnowsLoadsAndServes) {
  // Appended fields in its answer, function table, service and method descriptions, a larger method stride,
  // and a peer-credentials struct the host must fill without writing past the fields it knows.
  ExpectLoadsAndServes("larger", "group 'larger' loaded from " + Fixture("larger") + " (plugin version 2.0.0, ABI " +
                                       std::to_string(CSI_PROXY_ABI_VERSION_CURRENT) + ")");
}

TEST(AbiGrowth, ALibraryThatSpeaksALaterVersionTooAnswersTheHostsNewest) {
  ExpectLoadsAndServes("range", "group 'range' loaded from " + Fixture("range") + " (plugin version 1.2.0, ABI " +
                                    std::to_string(CSI_PROXY_ABI_VERSION_CURRENT) + ")");
}

TEST(AbiGrowth, ALibraryBuiltAgainstTheVersionOneHeaderLoadsAndServes) {
  static_assert(CSI_PROXY_ABI_VERSION_CURRENT > CSI_PROXY_ABI_VERSION_1);
  ExpectLoadsAndServes("version1",
                       "group 'version1' loaded from " + Fixture("version1") + " (plugin version 1.0.0, ABI 1)");
}

}  // namespace
}  // namespace csi_proxy::testing

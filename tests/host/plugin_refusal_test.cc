// A missing, broken or foreign group library is refused with one clear line naming the group, the file and the
// reason; the other groups keep serving, or the host refuses to start when the group is required.
#include <gtest/gtest.h>

#include <filesystem>

#include "csi_proxy/plugin_abi.h"
#include "grpc_client.h"
#include "host_process.h"
#include "run_program.h"
#include "v1/echo.pb.h"

namespace csi_proxy::testing {
namespace {

namespace fs = std::filesystem;

std::string Fixture(const std::string& group) { return BuildDir() + "/tests/fixtures/libcsi-proxy-" + group + ".so"; }

struct RefusalCase {
  const char* name;
  std::string library;
  std::string reason;  // what the log line must say
};

std::vector<RefusalCase> Cases() {
  return {
      {"missing", "/nonexistent/libcsi-proxy-missing.so", "the library file does not exist"},
      {"noentry", Fixture("noentry"),
       "the library does not export csi_proxy_plugin_negotiate; it is not a csi-proxy group library"},
      {"abifuture", Fixture("abifuture"), "the library speaks ABI version 99; this host speaks 1 to 2"},
      {"truncated", Fixture("truncated"),
       "the negotiation answer is truncated or malformed: struct_size 12, expected at least 40"},
      {"truncapi", Fixture("truncapi"),
       "the plugin function table is truncated or malformed: struct_size " + std::to_string(sizeof(size_t)) +
           ", expected at least " + std::to_string(CSI_PROXY_PLUGIN_API_V1_SIZE)},
      {"truncdesc", Fixture("truncdesc"),
       "service description is truncated or malformed: struct_size " + std::to_string(2 * sizeof(size_t)) +
           ", expected at least " + std::to_string(CSI_PROXY_SERVICE_DESC_V1_SIZE)},
      {"badgroup", Fixture("badgroup"),
       "the library answers the group name '../Bad_Group', which is not a valid group name (lowercase letters and "
       "digits, starting with a letter, at most 32 characters)"},
      {"initfails", Fixture("initfails"), "init failed with FAILED_PRECONDITION: the widget driver is not loaded"},
      {"initthrows", Fixture("initthrows"), "init failed with INTERNAL: init threw widget table corrupt"},
      {"echodup", Fixture("echodup"),
       "the library answers the group name 'echo', but it is configured under [groups.echodup]; a library serves "
       "only the group of its own name (configure it under [groups.echo], or use the library of group 'echodup')"},
      {"manymethods", Fixture("manymethods"),
       "service many.Many declares 200000 methods; a service may have at most 256 "
       "(CSI_PROXY_MAX_METHODS_PER_SERVICE)"},
      {"manyservices", Fixture("manyservices"),
       "the library registers more than 64 services; a library may register at most that many "
       "(CSI_PROXY_MAX_SERVICES_PER_LIBRARY)"},
  };
}

class Refusal : public ::testing::TestWithParam<RefusalCase> {};

TEST_P(Refusal, IsLoggedAndTheOtherGroupsStillServe) {
  const RefusalCase& c = GetParam();
  HostProcess host("[groups.echo]\nenabled = true\n[groups." + std::string(c.name) + "]\nlibrary = \"" + c.library +
                   "\"\n");
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1"})) << host.error();
  std::string expected = "group '" + std::string(c.name) + "' (" + c.library + "): " + c.reason + " (skipped)";
  EXPECT_NE(host.log().find(expected), std::string::npos) << "expected: " << expected << "\nlog:\n" << host.log();
  v1::EchoRequest req;
  req.set_text("alive");
  v1::EchoResponse resp;
  EXPECT_TRUE(Call(Dial(host.endpoint("csi-proxy-echo-v1")), "/v1.Echo/Echo", req, &resp).ok());
  EXPECT_EQ(host.Stop(), 0);
}

TEST_P(Refusal, OfARequiredGroupStopsTheHost) {
  const RefusalCase& c = GetParam();
  HostProcess host("[groups.echo]\nenabled = true\n[groups." + std::string(c.name) +
                   "]\nrequired = true\nlibrary = \"" + c.library + "\"\n");
  EXPECT_EQ(host.RunToExit({}), 1);
  EXPECT_NE(host.log().find(c.reason + " (required: refusing to start)"), std::string::npos) << host.log();
  EXPECT_TRUE(fs::is_empty(host.endpoint_dir()));
}

INSTANTIATE_TEST_SUITE_P(EachBadLibrary, Refusal, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(PluginBuild, AGroupLibraryExportsExactlyOneSymbol) {
  for (const std::string& lib : {PluginDir() + "/libcsi-proxy-echo.so", Fixture("twin"), Fixture("initfails")}) {
    auto nm = common::RunProgram({"/usr/bin/nm", "-D", "--defined-only", "--format=just-symbols", lib});
    ASSERT_TRUE(nm.ok()) << nm.status().message();
    EXPECT_EQ(nm->output, "csi_proxy_plugin_negotiate\n") << lib;
  }
}

}  // namespace
}  // namespace csi_proxy::testing

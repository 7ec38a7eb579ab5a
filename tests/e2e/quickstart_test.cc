// The README's quickstart, as a user runs it: start the proxy, list the endpoints and call one with the example
// client.
#include <gtest/gtest.h>

#include <filesystem>

#include "host_process.h"
#include "run_program.h"

namespace csi_proxy::testing {
namespace {

TEST(Quickstart, TheExampleClientListsTheEndpointsAndCallsPathExists) {
  HostProcess host("[groups.filesystem]\nenabled = true\n");
  ASSERT_TRUE(host.Start({"csi-proxy-filesystem-v1", "csi-proxy-filesystem-v2alpha1"})) << host.error();
  std::filesystem::create_directories(host.kubelet_dir() + "/pods");

  auto run = common::RunProgram(
      {BuildDir() + "/bin/csi-proxy-example-client", host.endpoint_dir(), host.kubelet_dir() + "/pods"});
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->exit_code, 0) << run->output;
  for (const char* version : {"v1alpha1", "v1beta1", "v1beta2", "v1", "v2alpha1"}) {
    EXPECT_NE(run->output.find("  csi-proxy-filesystem-" + std::string(version) + "\n"), std::string::npos)
        << run->output;
  }
  EXPECT_NE(run->output.find("PathExists(" + host.kubelet_dir() + "/pods) = true"), std::string::npos) << run->output;

  // A path outside the allowed roots is refused, and the client says so.
  run = common::RunProgram({BuildDir() + "/bin/csi-proxy-example-client", host.endpoint_dir(), "/etc"});
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->exit_code, 1);
  EXPECT_NE(run->output.find("PathExists(/etc) failed"), std::string::npos) << run->output;
  EXPECT_NE(run->output.find("(code 7)"), std::string::npos) << run->output;  // PERMISSION_DENIED
}

}  // namespace
}  // namespace csi_proxy::testing

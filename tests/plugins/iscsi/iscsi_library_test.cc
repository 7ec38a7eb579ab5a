// The iSCSI group library as built, driven through the C ABI by the SDK's fake host: what a call's deadline means
// for the work behind it.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "csi_proxy/testing/fake_host.hpp"
#include "temp_dir.h"
#include "v1alpha2/iscsi.pb.h"

namespace csi_proxy::testing {
namespace {

using sdk::testing::CallOptions;
using sdk::testing::FakeHost;

// A portal that accepts the connection and never says a word.
class SilentPortal {
 public:
  SilentPortal() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    if (bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 && listen(fd_, 4) == 0 &&
        getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len) == 0) {
      port_ = ntohs(sa.sin_port);
    }
  }
  ~SilentPortal() { close(fd_); }
  uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

TEST(IscsiLibrary, DiscoveryStopsAtTheCallsDeadlineNotAtTheGroupsDiscoveryTimeout) {
  TempDir dir;
  SilentPortal portal;
  ASSERT_NE(portal.port(), 0);
  FakeHost host({.kubelet_path = dir.MakeDir("kubelet"), .working_dirs = {}, .state_dir = dir.MakeDir("state")});
  ASSERT_TRUE(host.Load(CSI_PROXY_ISCSI_LIBRARY).ok());
  ASSERT_TRUE(host.Negotiate().ok());
  ASSERT_TRUE(host.Init("discovery_timeout_seconds = 60\n").ok());
  v1alpha2::AddTargetPortalRequest add;
  add.mutable_target_portal()->set_target_address("127.0.0.1");
  add.mutable_target_portal()->set_target_port(portal.port());
  v1alpha2::AddTargetPortalResponse added;
  ASSERT_TRUE(host.Call("/v1alpha2.Iscsi/AddTargetPortal", add, &added).ok());

  v1alpha2::DiscoverTargetPortalRequest discover;
  *discover.mutable_target_portal() = add.target_portal();
  v1alpha2::DiscoverTargetPortalResponse found;
  CallOptions call;
  call.deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(500);
  auto started = std::chrono::steady_clock::now();
  auto result = host.Call("/v1alpha2.Iscsi/DiscoverTargetPortal", discover, &found, call);
  auto took = std::chrono::steady_clock::now() - started;

  ASSERT_TRUE(result.completed);
  EXPECT_EQ(result.code, Code::kDeadlineExceeded) << result.Describe();
  // The handler gave its worker back soon after the deadline, not after the group's 60 s.
  EXPECT_LT(took, std::chrono::seconds(2));
  host.Shutdown();
  EXPECT_TRUE(host.violations().empty()) << host.violations().front();
}

}  // namespace
}  // namespace csi_proxy::testing

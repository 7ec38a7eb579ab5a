// The iSCSI group end to end: the real host loads the real group library and serves csi-proxy-iscsi-v1alpha2 and
// -v1alpha1 on Unix sockets; a gRPC client sends the bytes any csi-proxy client sends. Discovery runs against a
// real target (tgtd on loopback, tests/support/tgt_target.h).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "grpc_client.h"
#include "host_process.h"
#include "iscsi_backend_linux.h"
#include "tgt_target.h"
#include "v1alpha1/iscsi.pb.h"
#include "v1alpha2/iscsi.pb.h"

namespace csi_proxy::testing {
namespace {

namespace fs = std::filesystem;
using test_support::TgtTarget;
using test_support::TgtTargetOptions;

constexpr const char* kV1alpha2 = "csi-proxy-iscsi-v1alpha2";
constexpr const char* kV1alpha1 = "csi-proxy-iscsi-v1alpha1";

// One proxy "installation": a state directory that outlives host restarts.
class IscsiEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override { StartHost(); }

  void StartHost(const std::string& extra_group_keys = "") {
    host_.reset();
    host_ = std::make_unique<HostProcess>(
        "[groups.iscsi]\nrequired = true\ninitiator_name = \"iqn.2024-01.io.k8s.csi-proxy.test:e2e\"\n" +
            extra_group_keys,
        "state_dir = \"" + state_.path() + "\"\n");
    ASSERT_TRUE(host_->Start({kV1alpha2, kV1alpha1})) << host_->error() << host_->log();
    channel_ = Dial(host_->endpoint(kV1alpha2));
  }

  static v1alpha2::TargetPortal Portal(const std::string& address, uint32_t port) {
    v1alpha2::TargetPortal p;
    p.set_target_address(address);
    p.set_target_port(port);
    return p;
  }

  grpc::Status Add(const v1alpha2::TargetPortal& portal) {
    v1alpha2::AddTargetPortalRequest req;
    *req.mutable_target_portal() = portal;
    v1alpha2::AddTargetPortalResponse resp;
    return Call(channel_, "/v1alpha2.Iscsi/AddTargetPortal", req, &resp);
  }
  grpc::Status Remove(const v1alpha2::TargetPortal& portal) {
    v1alpha2::RemoveTargetPortalRequest req;
    *req.mutable_target_portal() = portal;
    v1alpha2::RemoveTargetPortalResponse resp;
    return Call(channel_, "/v1alpha2.Iscsi/RemoveTargetPortal", req, &resp);
  }
  std::vector<std::pair<std::string, uint32_t>> List() {
    v1alpha2::ListTargetPortalsResponse resp;
    auto s = Call(channel_, "/v1alpha2.Iscsi/ListTargetPortals", v1alpha2::ListTargetPortalsRequest(), &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    std::vector<std::pair<std::string, uint32_t>> out;
    for (const auto& p : resp.target_portals()) out.emplace_back(p.target_address(), p.target_port());
    return out;
  }
  grpc::Status Discover(const v1alpha2::TargetPortal& portal, std::vector<std::string>* iqns) {
    v1alpha2::DiscoverTargetPortalRequest req;
    *req.mutable_target_portal() = portal;
    v1alpha2::DiscoverTargetPortalResponse resp;
    auto s = Call(channel_, "/v1alpha2.Iscsi/DiscoverTargetPortal", req, &resp);
    if (iqns != nullptr) iqns->assign(resp.iqns().begin(), resp.iqns().end());
    return s;
  }

  TempDir state_;
  std::unique_ptr<HostProcess> host_;
  std::shared_ptr<grpc::Channel> channel_;
};

using Portals = std::vector<std::pair<std::string, uint32_t>>;

// Upstream's portal test, with port 3260 and with port 0 (which means 3260).
TEST_F(IscsiEndToEnd, PortalSequenceWithPort3260AndPort0) {
  for (uint32_t port : {3260u, 0u}) {
    SCOPED_TRACE(port);
    EXPECT_EQ(List(), Portals{});
    auto s = Add(Portal("127.0.0.1", port));
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(List(), (Portals{{"127.0.0.1", 3260}}));
    s = Remove(Portal("127.0.0.1", port));
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(List(), Portals{});
  }
}

TEST_F(IscsiEndToEnd, DiscoverReturnsTheTargetsIqn) {
  std::string why_not;
  auto target = TgtTarget::Start(TgtTargetOptions{}, &why_not);
  if (!target) GTEST_SKIP() << "no iSCSI target: " << why_not;
  auto portal = Portal(target->address(), target->port());
  ASSERT_TRUE(Add(portal).ok());
  std::vector<std::string> iqns;
  auto s = Discover(portal, &iqns);
  ASSERT_TRUE(s.ok()) << s.error_message() << "\n" << host_->log();
  EXPECT_EQ(iqns, target->iqns());
}

TEST_F(IscsiEndToEnd, DiscoverOnAnUnregisteredPortalIsNotFound) {
  auto s = Discover(Portal("127.0.0.1", 3260), nullptr);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
}

TEST_F(IscsiEndToEnd, PortalsAndTheMutualSecretSurviveAHostRestart) {
  std::string why_not;
  auto target = TgtTarget::Start(TgtTargetOptions{}, &why_not);
  if (!target) GTEST_SKIP() << "no iSCSI target: " << why_not;
  auto portal = Portal(target->address(), target->port());
  ASSERT_TRUE(Add(portal).ok());
  ASSERT_TRUE(Add(Portal("storage.example.com", 0)).ok());
  v1alpha2::SetMutualChapSecretRequest secret;
  secret.set_mutualchapsecret("Mutual-Secret-12");
  v1alpha2::SetMutualChapSecretResponse secret_resp;
  ASSERT_TRUE(Call(channel_, "/v1alpha2.Iscsi/SetMutualChapSecret", secret, &secret_resp).ok());
  channel_.reset();
  ASSERT_EQ(host_->Stop(), 0);

  StartHost();
  EXPECT_EQ(List(), (Portals{{target->address(), target->port()}, {"storage.example.com", 3260}}));
  std::vector<std::string> iqns;
  auto s = Discover(portal, &iqns);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(iqns, target->iqns());
  auto mode = fs::status(state_.path() + "/iscsi/mutual-chap-secret").permissions();
  EXPECT_EQ(mode, fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(fs::status(state_.path() + "/iscsi").permissions(), fs::perms::owner_all);
}

// Upstream crashed the whole process on a request without target_portal.
// A red-team pass registered portals until the state file passed the 1 MiB its loader reads: the group then
// refused to load at every later start. The list is capped (max_portals, 256 by default) and what is stored loads.
TEST_F(IscsiEndToEnd, PortalsBeyondMaxPortalsAreResourceExhaustedAndTheGroupStillLoadsAfterARestart) {
  auto nth = [](int i) { return Portal("10.1." + std::to_string(i / 250) + "." + std::to_string(i % 250 + 1), 3260); };
  for (int i = 0; i < 256; ++i) ASSERT_TRUE(Add(nth(i)).ok()) << i;
  auto refused = Add(nth(256));
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_TRUE(Add(nth(0)).ok());  // a registered portal again changes nothing, so it is not refused
  EXPECT_EQ(List().size(), 256u);

  StartHost();  // the stored list loads
  ASSERT_EQ(List().size(), 256u);
  EXPECT_EQ(Add(nth(256)).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);

  StartHost("max_portals = 10\n");  // a smaller cap still loads a larger stored list; only new portals are refused
  ASSERT_EQ(List().size(), 256u);
  EXPECT_EQ(Add(nth(256)).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(Remove(nth(0)).ok());
  EXPECT_EQ(List().size(), 255u);
}

TEST(IscsiGroupConfig, MaxPortalsOutsideItsRangeRefusesTheGroup) {
  for (const char* value : {"0", "4001"}) {
    HostProcess host(std::string("[groups.iscsi]\nrequired = true\nmax_portals = ") + value + "\n");
    EXPECT_FALSE(host.Start({kV1alpha2}, std::chrono::seconds(10))) << value;
    EXPECT_NE(host.log().find("max_portals"), std::string::npos) << host.log();
  }
}

TEST_F(IscsiEndToEnd, RequestsWithoutATargetPortalAreInvalidArgumentAndTheHostStaysUp) {
  const std::string iqn = "iqn.2024-01.io.example:t";
  std::vector<std::pair<std::string, std::string>> calls;
  {
    v1alpha2::ConnectTargetRequest c;
    c.set_iqn(iqn);
    v1alpha2::DisconnectTargetRequest d;
    d.set_iqn(iqn);
    v1alpha2::GetTargetDisksRequest g;
    g.set_iqn(iqn);
    calls = {{"AddTargetPortal", v1alpha2::AddTargetPortalRequest().SerializeAsString()},
             {"DiscoverTargetPortal", v1alpha2::DiscoverTargetPortalRequest().SerializeAsString()},
             {"RemoveTargetPortal", v1alpha2::RemoveTargetPortalRequest().SerializeAsString()},
             {"ConnectTarget", c.SerializeAsString()},
             {"DisconnectTarget", d.SerializeAsString()},
             {"GetTargetDisks", g.SerializeAsString()}};
  }
  for (const auto& [method, bytes] : calls) {
    std::string out;
    auto s = CallRaw(channel_, "/v1alpha2.Iscsi/" + method, bytes, &out);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << method << ": " << s.error_message();
    EXPECT_NE(s.error_message().find("target_portal"), std::string::npos) << s.error_message();
    auto v1 = CallRaw(Dial(host_->endpoint(kV1alpha1)), "/v1alpha1.Iscsi/" + method, bytes, &out);
    EXPECT_EQ(v1.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << method << ": " << v1.error_message();
  }
  EXPECT_TRUE(host_->running());
  EXPECT_EQ(List(), Portals{});
}

// This machine's kernel has no iSCSI initiator: ConnectTarget says so; the CHAP secret appears nowhere.
TEST_F(IscsiEndToEnd, ConnectWithoutAKernelInitiatorIsFailedPrecondition) {
  if (iscsi::EnsureKernelInitiator("/sys").ok()) GTEST_SKIP() << "this kernel has an iSCSI initiator";
  std::string why_not;
  auto target = TgtTarget::Start(TgtTargetOptions{}, &why_not);
  if (!target) GTEST_SKIP() << "no iSCSI target: " << why_not;
  auto portal = Portal(target->address(), target->port());
  ASSERT_TRUE(Add(portal).ok());
  v1alpha2::ConnectTargetRequest req;
  *req.mutable_target_portal() = portal;
  req.set_iqn(target->iqns()[0]);
  req.set_auth_type(v1alpha2::ONE_WAY_CHAP);
  req.set_chap_username("chapuser");
  req.set_chap_secret("Chap-Secret-E2e-" + std::to_string(getpid()));
  v1alpha2::ConnectTargetResponse resp;
  auto s = Call(channel_, "/v1alpha2.Iscsi/ConnectTarget", req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_NE(s.error_message().find("no iSCSI initiator"), std::string::npos) << s.error_message();
  EXPECT_EQ(s.error_message().find(req.chap_secret()), std::string::npos);
  EXPECT_EQ(host_->log().find(req.chap_secret()), std::string::npos);

  v1alpha2::GetTargetDisksRequest disks;
  *disks.mutable_target_portal() = portal;
  disks.set_iqn(target->iqns()[0]);
  v1alpha2::GetTargetDisksResponse disks_resp;
  ASSERT_TRUE(Call(channel_, "/v1alpha2.Iscsi/GetTargetDisks", disks, &disks_resp).ok());
  EXPECT_EQ(disks_resp.diskids_size(), 0);
  v1alpha2::DisconnectTargetRequest disconnect;
  *disconnect.mutable_target_portal() = portal;
  disconnect.set_iqn(target->iqns()[0]);
  v1alpha2::DisconnectTargetResponse disconnect_resp;
  EXPECT_TRUE(Call(channel_, "/v1alpha2.Iscsi/DisconnectTarget", disconnect, &disconnect_resp).ok());
}

TEST_F(IscsiEndToEnd, V1alpha1ServesTheSamePortalsWithoutSetMutualChapSecret) {
  auto v1 = Dial(host_->endpoint(kV1alpha1));
  ASSERT_TRUE(Add(Portal("10.0.0.7", 0)).ok());
  v1alpha1::ListTargetPortalsResponse resp;
  ASSERT_TRUE(Call(v1, "/v1alpha1.Iscsi/ListTargetPortals", v1alpha1::ListTargetPortalsRequest(), &resp).ok());
  ASSERT_EQ(resp.target_portals_size(), 1);
  EXPECT_EQ(resp.target_portals(0).target_address(), "10.0.0.7");
  EXPECT_EQ(resp.target_portals(0).target_port(), 3260u);
  std::string out;
  auto s = CallRaw(v1, "/v1alpha1.Iscsi/SetMutualChapSecret", "", &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED) << s.error_message();
}

TEST(IscsiGroupConfig, AnUnknownGroupKeyRefusesTheGroup) {
  HostProcess host("[groups.iscsi]\nrequired = true\nstate_directory = \"/tmp/x\"\n");
  EXPECT_FALSE(host.Start({kV1alpha2}, std::chrono::seconds(10)));
  EXPECT_NE(host.log().find("unknown key 'state_directory' in [groups.iscsi]"), std::string::npos) << host.log();
}

TEST(IscsiGroupConfig, AnInvalidInitiatorNameRefusesTheGroup) {
  HostProcess host("[groups.iscsi]\nrequired = true\ninitiator_name = \"not an iqn\"\n");
  EXPECT_FALSE(host.Start({kV1alpha2}, std::chrono::seconds(10)));
  EXPECT_NE(host.log().find("initiator_name"), std::string::npos) << host.log();
}

TEST_F(IscsiEndToEnd, MetacharactersAreRefusedAndNothingIsStored) {
  for (const std::string bad : {"127.0.0.1;reboot", "$(reboot)", "`id`", "a b", "x,y=z", "x\ny"}) {
    EXPECT_EQ(Add(Portal(bad, 3260)).error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad;
    v1alpha2::ConnectTargetRequest req;
    *req.mutable_target_portal() = Portal("127.0.0.1", 3260);
    req.set_iqn("iqn.2024-01.io.example:t" + bad);
    v1alpha2::ConnectTargetResponse resp;
    EXPECT_EQ(Call(channel_, "/v1alpha2.Iscsi/ConnectTarget", req, &resp).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
    req.set_iqn("iqn.2024-01.io.example:t");
    req.set_auth_type(v1alpha2::ONE_WAY_CHAP);
    req.set_chap_username("user" + bad);
    req.set_chap_secret("secret123456");
    EXPECT_EQ(Call(channel_, "/v1alpha2.Iscsi/ConnectTarget", req, &resp).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  EXPECT_FALSE(fs::exists(state_.path() + "/iscsi/portals"));
}

}  // namespace
}  // namespace csi_proxy::testing

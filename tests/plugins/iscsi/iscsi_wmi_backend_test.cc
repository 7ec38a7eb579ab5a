// The iSCSI group's Windows backend (plugins/iscsi/src/iscsi_backend_wmi.cc) behind its real service layer, against
// recorded answers of the Microsoft iSCSI Initiator's WMI (tests/windows/recorded_iscsi_initiator.h). Written from
// Microsoft's documentation of the MSFT_iSCSI* classes, iscsierr.h's codes and upstream's code (pkg/os/iscsi,
// pkg/wmi/iscsi.go); the group has not yet run on a Windows node.
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "iscsi_backend_wmi.h"
#include "iscsi_service.h"
#include "recorded_iscsi_initiator.h"

namespace csi_proxy::iscsi {
namespace {

namespace wmi = common::wmi;
using testing::RecordedIscsiInitiator;
using testing::RecordedWmi;

constexpr const char* kAddress = "192.0.2.10";
constexpr const char* kIqn = "iqn.2003-01.org.linux-iscsi.array:vol-1";
constexpr const char* kOtherIqn = "iqn.2003-01.org.linux-iscsi.array:vol-2";
constexpr const char* kChapSecret = "chap'$(x)secret";
constexpr const char* kMutualSecret = "mutual;`y`secret";

std::string Text(const wmi::Value& v) { return std::holds_alternative<std::string>(v) ? std::get<std::string>(v) : ""; }

class WmiIscsiBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    initiator_.Offer(kAddress, 3260, kIqn, {3, 1});
    service_ = std::make_unique<IscsiService>(MakeWmiIscsiBackend(wmi_.Connector(), Logger()), Logger());
  }

  LogSink Logger() {
    return [this](LogLevel, std::string_view line) {
      std::lock_guard lock(log_mu_);
      log_ += std::string(line) + "\n";
    };
  }

  Status ConnectAs(int32_t auth, const std::string& user = "", const std::string& secret = "",
                   const std::string& iqn = kIqn) {
    return service_->ConnectTarget({PortalRequest{kAddress, 0}, iqn, auth, user, secret});
  }

  RecordedWmi wmi_;
  RecordedIscsiInitiator initiator_{wmi_};
  std::mutex log_mu_;
  std::string log_;
  std::unique_ptr<IscsiService> service_;
};

TEST_F(WmiIscsiBackendTest, PortalsAreTheInitiatorsAddedOnceListedWithTheirPortAndRemoved) {
  EXPECT_TRUE(service_->ListTargetPortals()->empty());
  ASSERT_TRUE(service_->AddTargetPortal(PortalRequest{kAddress, 0}).ok());
  ASSERT_TRUE(service_->AddTargetPortal(PortalRequest{kAddress, 3260}).ok());  // the same portal: nothing new
  ASSERT_EQ(wmi_.CallsOf("New").size(), 1u);
  EXPECT_EQ(Text(RecordedWmi::Argument(wmi_.CallsOf("New").front(), "TargetPortalAddress")), kAddress);
  EXPECT_EQ(std::get<int64_t>(RecordedWmi::Argument(wmi_.CallsOf("New").front(), "TargetPortalPortNumber")), 3260);
  auto portals = service_->ListTargetPortals();
  ASSERT_TRUE(portals.ok());
  ASSERT_EQ(portals->size(), 1u);
  EXPECT_EQ(portals->front(), (Portal{kAddress, 3260}));

  ASSERT_TRUE(service_->RemoveTargetPortal(PortalRequest{kAddress, 0}).ok());
  EXPECT_TRUE(service_->ListTargetPortals()->empty());
  EXPECT_TRUE(service_->RemoveTargetPortal(PortalRequest{kAddress, 0}).ok());  // a retry: nothing to do
  EXPECT_EQ(wmi_.CallsOf("Remove").size(), 1u);
}

TEST_F(WmiIscsiBackendTest, AnUnreachablePortalIsUnavailableAndNotRegistered) {
  initiator_.Unreachable("192.0.2.99", 3260);
  Status added = service_->AddTargetPortal(PortalRequest{"192.0.2.99", 3260});
  EXPECT_EQ(added.code(), Code::kUnavailable) << added.message();
  EXPECT_NE(added.message().find("ISDSC_CONNECTION_FAILED"), std::string::npos) << added.message();
  EXPECT_TRUE(service_->ListTargetPortals()->empty());
}

TEST_F(WmiIscsiBackendTest, DiscoveryAsksThePortalAgainAndListsWhatItOffersNow) {
  EXPECT_EQ(service_->DiscoverTargetPortal(PortalRequest{kAddress, 0}).status().code(), Code::kNotFound);
  ASSERT_TRUE(service_->AddTargetPortal(PortalRequest{kAddress, 0}).ok());
  initiator_.Offer(kAddress, 3260, kOtherIqn);  // a volume the array exported after the portal was added
  auto iqns = service_->DiscoverTargetPortal(PortalRequest{kAddress, 0});
  ASSERT_TRUE(iqns.ok()) << iqns.status().message();
  EXPECT_EQ(*iqns, (std::vector<std::string>{kIqn, kOtherIqn}));
  EXPECT_EQ(wmi_.CallsOf("Update").size(), 1u);
  // Through the association upstream follows, with its roles.
  bool asked = false;
  for (const auto& q : wmi_.queries()) {
    asked = asked || q.find(
                         "WHERE AssocClass = MSFT_iSCSITargetToiSCSITargetPortal ResultClass = MSFT_iSCSITarget "
                         "Role = iSCSITargetPortal ResultRole = iSCSITarget") != std::string::npos;
  }
  EXPECT_TRUE(asked);
  initiator_.Unreachable(kAddress, 3260);
  EXPECT_EQ(service_->DiscoverTargetPortal(PortalRequest{kAddress, 0}).status().code(), Code::kUnavailable);
}

TEST_F(WmiIscsiBackendTest, ALoginWithoutAuthenticationGivesTheSessionsDisksAndALogoutEndsIt) {
  ASSERT_TRUE(service_->AddTargetPortal(PortalRequest{kAddress, 0}).ok());
  ASSERT_TRUE(ConnectAs(0).ok());
  ASSERT_EQ(wmi_.CallsOf("Connect").size(), 1u);
  const auto login = wmi_.CallsOf("Connect").front();
  EXPECT_EQ(login.path, "MSFT_iSCSITarget");  // the static Connect, as upstream calls it
  EXPECT_EQ(Text(RecordedWmi::Argument(login, "NodeAddress")), kIqn);
  EXPECT_EQ(Text(RecordedWmi::Argument(login, "TargetPortalAddress")), kAddress);
  EXPECT_EQ(Text(RecordedWmi::Argument(login, "AuthenticationType")), "NONE");
  EXPECT_TRUE(std::holds_alternative<std::monostate>(RecordedWmi::Argument(login, "ChapSecret")));
  // Not persistent, as upstream: IsPersistent is not passed (its default is false).
  EXPECT_TRUE(std::holds_alternative<std::monostate>(RecordedWmi::Argument(login, "IsPersistent")));

  auto disks = service_->GetTargetDisks(PortalRequest{kAddress, 0}, kIqn);
  ASSERT_TRUE(disks.ok()) << disks.status().message();
  EXPECT_EQ(*disks, (std::vector<std::string>{"1", "3"}));  // MSFT_Disk.Number, sorted

  ASSERT_TRUE(ConnectAs(0).ok());  // connected already: success, no second login
  EXPECT_EQ(wmi_.CallsOf("Connect").size(), 1u);

  ASSERT_TRUE(service_->DisconnectTarget(PortalRequest{kAddress, 0}, kIqn).ok());
  ASSERT_EQ(wmi_.CallsOf("Disconnect").size(), 1u);
  EXPECT_EQ(Text(RecordedWmi::Argument(wmi_.CallsOf("Disconnect").front(), "SessionIdentifier")).rfind("ffff", 0), 0u);
  EXPECT_FALSE(initiator_.IsConnected(kIqn));
  EXPECT_TRUE(service_->GetTargetDisks(PortalRequest{kAddress, 0}, kIqn)->empty());
  EXPECT_TRUE(service_->DisconnectTarget(PortalRequest{kAddress, 0}, kIqn).ok());  // a retry: nothing to do
  EXPECT_EQ(wmi_.CallsOf("Disconnect").size(), 1u);
}

TEST_F(WmiIscsiBackendTest, OneWayChapSendsTheNameAndSecretAndAWrongSecretIsPermissionDenied) {
  initiator_.RequireChap(kIqn, "node-user", kChapSecret);
  ASSERT_TRUE(service_->AddTargetPortal(PortalRequest{kAddress, 0}).ok());
  Status wrong = ConnectAs(1, "node-user", "not-the-secret");
  EXPECT_EQ(wrong.code(), Code::kPermissionDenied) << wrong.message();
  EXPECT_NE(wrong.message().find("ISDSC_AUTHENTICATION_FAILURE"), std::string::npos) << wrong.message();
  EXPECT_FALSE(initiator_.IsConnected(kIqn));

  ASSERT_TRUE(ConnectAs(1, "node-user", kChapSecret).ok());
  const auto login = wmi_.CallsOf("Connect").back();
  EXPECT_EQ(Text(RecordedWmi::Argument(login, "AuthenticationType")), "ONEWAYCHAP");
  EXPECT_EQ(Text(RecordedWmi::Argument(login, "ChapUsername")), "node-user");
  EXPECT_EQ(Text(RecordedWmi::Argument(login, "ChapSecret")), kChapSecret);
}

TEST_F(WmiIscsiBackendTest, MutualChapNeedsTheInitiatorsSecretWhichSetMutualChapSecretGivesIt) {
  initiator_.RequireChap(kIqn, "", kChapSecret);
  ASSERT_TRUE(service_->AddTargetPortal(PortalRequest{kAddress, 0}).ok());
  EXPECT_EQ(ConnectAs(2, "", kChapSecret).code(), Code::kPermissionDenied);  // no secret to prove the target with

  ASSERT_TRUE(service_->SetMutualChapSecret(kMutualSecret).ok());
  EXPECT_EQ(initiator_.mutual_secret(), kMutualSecret);
  ASSERT_EQ(wmi_.CallsOf("SetCHAPSecret").size(), 1u);
  EXPECT_EQ(wmi_.CallsOf("SetCHAPSecret").front().path, "MSFT_iSCSISession");  // static, as upstream calls it
  ASSERT_TRUE(ConnectAs(2, "", kChapSecret).ok());
  const auto login = wmi_.CallsOf("Connect").back();
  EXPECT_EQ(Text(RecordedWmi::Argument(login, "AuthenticationType")), "MUTUALCHAP");
  // Without a CHAP name the initiator sends its own node name.
  EXPECT_TRUE(std::holds_alternative<std::monostate>(RecordedWmi::Argument(login, "ChapUsername")));

  ASSERT_TRUE(service_->SetMutualChapSecret("").ok());  // clears it
  EXPECT_EQ(initiator_.mutual_secret(), "");
}

TEST_F(WmiIscsiBackendTest, SecretsTheInitiatorRefusesAreInvalidArguments) {
  initiator_.FailNext("SetCHAPSecret", 0xEFFF004C);  // ISDSC_INVALID_INITIATOR_CHAP_SECRET: 12 to 16 bytes
  Status s = service_->SetMutualChapSecret("short");
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.message();
}

TEST_F(WmiIscsiBackendTest, ATargetThePortalDoesNotOfferIsNotFoundAndAnUnregisteredPortalToo) {
  EXPECT_EQ(ConnectAs(0).code(), Code::kNotFound);  // no portal yet
  ASSERT_TRUE(service_->AddTargetPortal(PortalRequest{kAddress, 0}).ok());
  Status s = ConnectAs(0, "", "", "iqn.2003-01.org.example:absent");
  EXPECT_EQ(s.code(), Code::kNotFound) << s.message();
  EXPECT_NE(s.message().find("is not offered by portal 192.0.2.10:3260"), std::string::npos) << s.message();
  EXPECT_TRUE(wmi_.CallsOf("Connect").empty());
  // A target exported after the portal was added is found by a fresh discovery, then logged in to.
  initiator_.Offer(kAddress, 3260, kOtherIqn);
  EXPECT_TRUE(ConnectAs(0, "", "", kOtherIqn).ok());
}

TEST_F(WmiIscsiBackendTest, APersistentSessionIsUnregisteredBeforeTheLogout) {
  ASSERT_TRUE(service_->AddTargetPortal(PortalRequest{kAddress, 0}).ok());
  initiator_.MakeNextSessionPersistent();
  ASSERT_TRUE(ConnectAs(0).ok());
  ASSERT_TRUE(service_->DisconnectTarget(PortalRequest{kAddress, 0}, kIqn).ok());
  ASSERT_EQ(wmi_.CallsOf("Unregister").size(), 1u);
  std::vector<std::string> order;
  for (const auto& c : wmi_.calls()) order.push_back(c.method);
  auto unregister = std::find(order.begin(), order.end(), "Unregister");
  EXPECT_EQ(*(unregister + 1), "Disconnect");
}

TEST_F(WmiIscsiBackendTest, ALogoutWhileADiskIsInUseIsRefusedAndTheSessionStays) {
  ASSERT_TRUE(service_->AddTargetPortal(PortalRequest{kAddress, 0}).ok());
  ASSERT_TRUE(ConnectAs(0).ok());
  initiator_.FailNext("Disconnect", RecordedIscsiInitiator::kDeviceBusyOnSession);
  Status s = service_->DisconnectTarget(PortalRequest{kAddress, 0}, kIqn);
  EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.message();
  EXPECT_NE(s.message().find("ISDSC_DEVICE_BUSY_ON_SESSION"), std::string::npos) << s.message();
  EXPECT_TRUE(initiator_.IsConnected(kIqn));
}

TEST_F(WmiIscsiBackendTest, TheInitiatorsErrorsBecomeCodes) {
  ASSERT_TRUE(service_->AddTargetPortal(PortalRequest{kAddress, 0}).ok());
  const struct {
    uint32_t code;
    Code status;
  } cases[] = {
      {RecordedIscsiInitiator::kTargetNotFound, Code::kNotFound},
      {0xEFFF0024, Code::kUnavailable},         // ISDSC_TRANSPORT_ERROR
      {0xEFFF003E, Code::kFailedPrecondition},  // ISDSC_SERVICE_NOT_RUNNING: the MSiSCSI service is stopped
      {0x80070005, Code::kPermissionDenied},    // access denied
  };
  for (const auto& c : cases) {
    initiator_.FailNext("Connect", c.code);
    Status s = ConnectAs(0);
    EXPECT_EQ(s.code(), c.status) << s.message();
    EXPECT_FALSE(initiator_.IsConnected(kIqn));
  }
  // Another login of the same target got there first: connected is what was asked for.
  initiator_.FailNext("Connect", RecordedIscsiInitiator::kAlreadyLoggedIn);
  EXPECT_TRUE(ConnectAs(0).ok());
}

TEST_F(WmiIscsiBackendTest, SecretsReachOnlyTheirMethodArgumentsNeverALogLineAQueryOrAnError) {
  initiator_.RequireChap(kIqn, "node-user", "the-right-one");
  ASSERT_TRUE(service_->AddTargetPortal(PortalRequest{kAddress, 0}).ok());
  ASSERT_TRUE(service_->SetMutualChapSecret(kMutualSecret).ok());
  Status failed = ConnectAs(2, "node-user", kChapSecret);
  ASSERT_FALSE(failed.ok());
  for (const char* secret : {"chap'", "mutual;"}) {
    EXPECT_EQ(failed.message().find(secret), std::string::npos) << failed.message();
    EXPECT_EQ(log_.find(secret), std::string::npos) << log_;
    for (const auto& q : wmi_.queries()) EXPECT_EQ(q.find(secret), std::string::npos) << q;
  }
  for (const auto& call : wmi_.calls()) {
    for (const auto& [name, value] : call.in) {
      const std::string text = Text(value);
      if (text.find("chap'") != std::string::npos || text.find("mutual;") != std::string::npos) {
        EXPECT_EQ(name, "ChapSecret") << call.method;
      }
    }
  }
}

TEST_F(WmiIscsiBackendTest, WithoutTheInitiatorsClassesEveryMethodIsUnimplementedNamingTheClass) {
  RecordedWmi bare;  // a Storage namespace without the iSCSI classes (Wine has none)
  bare.AddClass(wmi::kStorageNamespace, "MSFT_Disk");
  IscsiService service(MakeWmiIscsiBackend(bare.Connector(), {}), {});
  const PortalRequest portal{kAddress, 0};
  std::vector<Status> answers = {service.AddTargetPortal(portal),
                                 service.RemoveTargetPortal(portal),
                                 service.ListTargetPortals().status(),
                                 service.DiscoverTargetPortal(portal).status(),
                                 service.ConnectTarget({portal, kIqn, 0, "", ""}),
                                 service.DisconnectTarget(portal, kIqn),
                                 service.GetTargetDisks(portal, kIqn).status(),
                                 service.SetMutualChapSecret(kMutualSecret)};
  for (const Status& s : answers) {
    EXPECT_EQ(s.code(), Code::kUnimplemented) << s.message();
    EXPECT_NE(s.message().find("MSFT_iSCSI"), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace csi_proxy::iscsi

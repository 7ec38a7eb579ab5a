// The iscsiadm login exit codes a CSI driver must tell apart: bad credentials, a missing target, an unreachable
// portal, a timeout, a broken node. The wrong-CHAP case against a real target runs in the VM lane
// (iscsi_staging_e2e_test, IscsiStaging.AWrongChapSecretIsPermissionDeniedAndLeavesNoSessionAndNoRecord).
#include "iscsiadm_status.h"

#include <gtest/gtest.h>

namespace csi_proxy::iscsi {
namespace {

const std::string kWhat = "iqn.2024-01.io.example:t at 127.0.0.1:3260";

TEST(IscsiadmLoginStatus, AuthorizationFailureIsPermissionDenied) {
  auto s = IscsiadmLoginStatus(24, kWhat, "iscsiadm: Login failed due to authorization failure");
  EXPECT_EQ(s.code(), Code::kPermissionDenied);
  EXPECT_NE(s.message().find("exit 24, authorization failure"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(kWhat), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("Login failed due to authorization failure"), std::string::npos) << s.message();
}

TEST(IscsiadmLoginStatus, FatalLoginAndNoRecordAreNotFound) {
  EXPECT_EQ(IscsiadmLoginStatus(19, kWhat, "").code(), Code::kNotFound);
  EXPECT_EQ(IscsiadmLoginStatus(21, kWhat, "").code(), Code::kNotFound);
}

TEST(IscsiadmLoginStatus, AnUnreachablePortalIsUnavailableAndATimeoutDeadlineExceeded) {
  EXPECT_EQ(IscsiadmLoginStatus(4, kWhat, "").code(), Code::kUnavailable);
  EXPECT_EQ(IscsiadmLoginStatus(29, kWhat, "").code(), Code::kUnavailable);
  EXPECT_EQ(IscsiadmLoginStatus(28, kWhat, "").code(), Code::kUnavailable);
  EXPECT_EQ(IscsiadmLoginStatus(8, kWhat, "").code(), Code::kDeadlineExceeded);
  EXPECT_EQ(IscsiadmLoginStatus(11, kWhat, "").code(), Code::kDeadlineExceeded);
}

TEST(IscsiadmLoginStatus, AMissingTransportOrIscsidIsFailedPrecondition) {
  for (int code : {12, 13, 18, 20}) {
    SCOPED_TRACE(code);
    EXPECT_EQ(IscsiadmLoginStatus(code, kWhat, "").code(), Code::kFailedPrecondition);
  }
  EXPECT_NE(IscsiadmLoginStatus(20, kWhat, "").message().find("iscsid"), std::string::npos);
}

TEST(IscsiadmLoginStatus, AnExistingSessionIsSuccess) { EXPECT_TRUE(IscsiadmLoginStatus(15, kWhat, "").ok()); }

TEST(IscsiadmLoginStatus, EverythingElseIsInternalWithTheExitCode) {
  for (int code : {1, 5, 6, 7, 9, 255}) {
    SCOPED_TRACE(code);
    auto s = IscsiadmLoginStatus(code, kWhat, "some output");
    EXPECT_EQ(s.code(), Code::kInternal);
    EXPECT_NE(s.message().find("exit " + std::to_string(code)), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("some output"), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace csi_proxy::iscsi

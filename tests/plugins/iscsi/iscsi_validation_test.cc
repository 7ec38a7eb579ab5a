// The iSCSI input rules: what a request may carry before anything runs.
#include "iscsi_validation.h"

#include <gtest/gtest.h>

namespace csi_proxy::iscsi {
namespace {

TEST(IscsiPortalValidation, PortZeroMeansTheDefaultIscsiPort) {
  auto portal = ValidatePortal("127.0.0.1", 0);
  ASSERT_TRUE(portal.ok()) << portal.status().message();
  EXPECT_EQ(portal->port, 3260);
  EXPECT_EQ(portal->address, "127.0.0.1");
}

TEST(IscsiPortalValidation, ExplicitPortIsKept) {
  auto portal = ValidatePortal("10.0.0.5", 13260);
  ASSERT_TRUE(portal.ok());
  EXPECT_EQ(portal->port, 13260);
}

TEST(IscsiPortalValidation, PortAbove65535IsRefused) {
  auto portal = ValidatePortal("127.0.0.1", 65536);
  EXPECT_EQ(portal.status().code(), Code::kInvalidArgument);
}

TEST(IscsiPortalValidation, HostNamesAreLowercased) {
  auto portal = ValidatePortal("Storage-1.Example.COM", 3260);
  ASSERT_TRUE(portal.ok());
  EXPECT_EQ(portal->address, "storage-1.example.com");
}

TEST(IscsiPortalValidation, Ipv6WithOrWithoutBracketsIsAccepted) {
  auto bare = ValidatePortal("fd00::1", 3260);
  auto bracketed = ValidatePortal("[FD00::1]", 3260);
  ASSERT_TRUE(bare.ok());
  ASSERT_TRUE(bracketed.ok());
  EXPECT_EQ(bare->address, "fd00::1");
  EXPECT_EQ(bracketed->address, "fd00::1");
  EXPECT_EQ(PortalToString(*bare), "[fd00::1]:3260");
}

TEST(IscsiPortalValidation, MalformedAddressesAreRefused) {
  for (const char* address :
       {"", "999.1.1.1", "-host", "host-", "a..b", "host name", "host;reboot", "$(reboot)", "`id`", "host,opt=1",
        "[127.0.0.1]", "host:3260", "/dev/sda", "host\nname", "--portal=x"}) {
    EXPECT_EQ(ValidatePortal(address, 3260).status().code(), Code::kInvalidArgument) << address;
  }
}

TEST(IscsiNameValidation, IqnEuiAndNaaFormsAreAccepted) {
  for (const char* iqn :
       {"iqn.2024-01.io.example:target0", "iqn.1991-05.com.microsoft:node-1.a", "iqn.2001-04.com.example",
        "IQN.2024-01.IO.EXAMPLE:Disk", "eui.02004567A425678D", "naa.52004567BA64678D",
        "naa.600a0980383041334a3f4a6f4b2d5a4e", "iqn.2005-10.org.freenas.ctl:pool_volume"}) {
    EXPECT_TRUE(ValidateIqn(iqn).ok()) << iqn << ": " << ValidateIqn(iqn).message();
  }
}

TEST(IscsiNameValidation, MalformedNamesAreRefused) {
  for (const char* iqn :
       {"", "target0", "iqn.24-01.io.example:x", "iqn.2024-01:x", "iqn.2024-01..x", "eui.123", "naa.12345",
        "iqn.2024-01.io.example:a b", "iqn.2024-01.io.example:a;b", "iqn.2024-01.io.example:$(id)",
        "iqn.2024-01.io.example:a/b", "iqn.2024-01.io.example:a,b", "iqn.2024-01.io.example:a=b"}) {
    EXPECT_EQ(ValidateIqn(iqn).code(), Code::kInvalidArgument) << iqn;
  }
  EXPECT_EQ(ValidateIqn("iqn.2024-01.io.example:" + std::string(220, 'a')).code(), Code::kInvalidArgument);
}

TEST(IscsiChapValidation, NamesAllowOnlyPlainCharacters) {
  EXPECT_TRUE(ValidateChapName("user.name_1@domain", "chap_username").ok());
  EXPECT_TRUE(ValidateChapName("iqn.2024-01.io.example:init", "chap_username").ok());
  for (const char* name : {"", "a b", "a;b", "a$b", "a`b", "a,b", "a=b", "a\nb", "a'b", "a\"b", "a|b", "a\\b"}) {
    EXPECT_EQ(ValidateChapName(name, "chap_username").code(), Code::kInvalidArgument) << name;
  }
}

TEST(IscsiChapValidation, SecretsArePrintableAndNeverEchoed) {
  EXPECT_TRUE(ValidateChapSecret("s3cr3t;$(x)`y`,z=1", "chap_secret").ok());
  for (const char* secret : {"", "with space", "new\nline", "tab\there", "del\x7f"}) {
    auto status = ValidateChapSecret(secret, "chap_secret");
    EXPECT_EQ(status.code(), Code::kInvalidArgument);
    if (std::string(secret).size() > 3) {
      EXPECT_EQ(status.message().find(secret), std::string::npos);
    }
  }
  EXPECT_EQ(ValidateChapSecret(std::string(256, 'x'), "chap_secret").code(), Code::kInvalidArgument);
}

TEST(IscsiAuthTypeValidation, OnlyTheThreeWireValuesAreKnown) {
  EXPECT_EQ(*ValidateAuthType(0), AuthType::kNone);
  EXPECT_EQ(*ValidateAuthType(1), AuthType::kOneWayChap);
  EXPECT_EQ(*ValidateAuthType(2), AuthType::kMutualChap);
  EXPECT_EQ(ValidateAuthType(3).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ValidateAuthType(-1).status().code(), Code::kInvalidArgument);
}

TEST(IscsiMessages, RequestTextIsMadePrintable) {
  EXPECT_EQ(QuoteValue("a\nb\\c\""), "\"a\\x0ab\\\\c\\\"\"");
  // A long value is cut, and the message says how long it was.
  std::string quoted = QuoteValue(std::string(5 * 1024 * 1024, 'x'));
  EXPECT_EQ(quoted, "\"" + std::string(common::kQuotedValueMax, 'x') + "...\" (5242880 bytes)");
}

}  // namespace
}  // namespace csi_proxy::iscsi

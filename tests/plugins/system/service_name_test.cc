// Service names from requests: only service unit names get through, in canonical form.
#include "service_name.h"

#include <gtest/gtest.h>

#include "text.h"
#include "unit_policy.h"

namespace csi_proxy::system {
namespace {

std::string Canonical(std::string_view name) {
  auto unit = CanonicalServiceUnit(name);
  EXPECT_TRUE(unit.ok()) << unit.status().message();
  return unit.ok() ? *unit : "";
}

void ExpectRefused(std::string_view name) {
  auto unit = CanonicalServiceUnit(name);
  EXPECT_EQ(unit.status().code(), Code::kInvalidArgument) << "accepted " << common::QuoteValue(name);
}

TEST(CanonicalServiceUnit, AppendsTheServiceSuffixToABareName) {
  EXPECT_EQ(Canonical("iscsid"), "iscsid.service");
  EXPECT_EQ(Canonical("MSiSCSI"), "MSiSCSI.service");
}

TEST(CanonicalServiceUnit, KeepsAServiceUnitName) { EXPECT_EQ(Canonical("ssh.service"), "ssh.service"); }

TEST(CanonicalServiceUnit, TreatsAnUnknownDottedTailAsPartOfTheName) {
  EXPECT_EQ(Canonical("org.example.agent"), "org.example.agent.service");
}

TEST(CanonicalServiceUnit, AcceptsTemplateInstancesAndSystemdEscapes) {
  EXPECT_EQ(Canonical("getty@tty1"), "getty@tty1.service");
  EXPECT_EQ(Canonical("systemd-fsck@dev-disk-by\\x2duuid-1234.service"),
            "systemd-fsck@dev-disk-by\\x2duuid-1234.service");
  EXPECT_EQ(Canonical("a:b_c-d"), "a:b_c-d.service");
}

TEST(CanonicalServiceUnit, RefusesOtherUnitTypes) {
  for (const char* name :
       {"reboot.target", "poweroff.target", "dbus.socket", "-.mount", "home.automount", "apt-daily.timer", "user.slice",
        "init.scope", "dev-sda.device", "swapfile.swap", "cups.path"}) {
    ExpectRefused(name);
  }
}

TEST(CanonicalServiceUnit, RefusesAnEmptyName) {
  EXPECT_EQ(CanonicalServiceUnit("").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(CanonicalServiceUnit("").status().message(), "service name is empty");
}

TEST(CanonicalServiceUnit, RefusesPathsShellSyntaxAndControlCharacters) {
  for (std::string_view name :
       {std::string_view("../etc/passwd"), std::string_view("/usr/lib/systemd/system/ssh.service"),
        std::string_view("a/b"), std::string_view("a b"), std::string_view("a;reboot"), std::string_view("$(reboot)"),
        std::string_view("`id`"), std::string_view("a|b"), std::string_view("a\nb"), std::string_view("a\0b", 3),
        std::string_view("a\\b"), std::string_view("a\\x2"), std::string_view("*"), std::string_view("ssh*"),
        std::string_view("caf\xc3\xa9"), std::string_view(" ssh"), std::string_view("ssh ")}) {
    ExpectRefused(name);
  }
}

TEST(CanonicalServiceUnit, RefusesTemplatesWithoutAnInstanceAndDoubleAts) {
  ExpectRefused("getty@");
  ExpectRefused("getty@.service");
  ExpectRefused("a@b@c");
}

TEST(CanonicalServiceUnit, RefusesLeadingDotDashOrAt) {
  ExpectRefused(".service");
  ExpectRefused(".hidden");
  ExpectRefused("-x");
  ExpectRefused("@x");
  ExpectRefused("foo..service");
}

TEST(CanonicalServiceUnit, EnforcesSystemdsLengthLimitIncludingTheSuffix) {
  const std::string stem_fits(kMaxUnitNameLength - 8, 'a');  // 247 + ".service" = 255
  EXPECT_EQ(Canonical(stem_fits), stem_fits + ".service");
  EXPECT_EQ(Canonical(stem_fits + ".service"), stem_fits + ".service");
  ExpectRefused(stem_fits + "a");  // 256 once the suffix is appended
  ExpectRefused(std::string(kMaxUnitNameLength + 1, 'a'));
  ExpectRefused(std::string(100000, 'a'));
}

TEST(CanonicalServiceUnit, QuotesTheRefusedNameSafelyInTheMessage) {
  auto unit = CanonicalServiceUnit("evil\nname\x1b[2J");
  ASSERT_EQ(unit.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(unit.status().message().find('\n'), std::string::npos);
  EXPECT_EQ(unit.status().message().find('\x1b'), std::string::npos);
  EXPECT_NE(unit.status().message().find("\"evil\\x0aname\\x1b[2J\""), std::string::npos) << unit.status().message();
  EXPECT_LT(CanonicalServiceUnit(std::string(5000, '/')).status().message().size(), 400u);
}

// ---- Windows service names (the Service Control Manager's key names), the rule of the Windows build.

TEST(CanonicalWindowsServiceName, AcceptsKeyNamesAndLowersThemAsTheScmComparesThem) {
  EXPECT_EQ(*CanonicalWindowsServiceName("MSiSCSI"), "msiscsi");
  EXPECT_EQ(*CanonicalWindowsServiceName("W32Time"), "w32time");
  EXPECT_EQ(*CanonicalWindowsServiceName("MSSQL$SQLEXPRESS"), "mssql$sqlexpress");
  EXPECT_EQ(*CanonicalWindowsServiceName("CDPUserSvc_1a2b3"), "cdpusersvc_1a2b3");
  EXPECT_EQ(*CanonicalWindowsServiceName("csi-proxy"), "csi-proxy");
  EXPECT_EQ(*CanonicalWindowsServiceName("Apple Mobile Device Service"), "apple mobile device service");
  EXPECT_EQ(*CanonicalWindowsServiceName("{4D36E972-E325-11CE}"), "{4d36e972-e325-11ce}");
  EXPECT_EQ(*CanonicalServiceName("kubelet", ServiceNaming::kWindows), "kubelet");
  EXPECT_EQ(*CanonicalServiceName("kubelet", ServiceNaming::kSystemd), "kubelet.service");
}

TEST(CanonicalWindowsServiceName, RefusesSeparatorsControlAndOtherCharacters) {
  for (std::string name :
       {"", "a\\b", "a/b", "a\nb", "a\tb", "a;b", "a|b", "a\"b", "a*", "a:b", "%SystemRoot%", "a\x80"}) {
    EXPECT_EQ(CanonicalWindowsServiceName(name).status().code(), Code::kInvalidArgument) << common::QuoteValue(name);
  }
  for (std::string name : {" a", "a ", ".a", "a.", "-a"}) {
    EXPECT_EQ(CanonicalWindowsServiceName(name).status().code(), Code::kInvalidArgument) << common::QuoteValue(name);
  }
  EXPECT_TRUE(CanonicalWindowsServiceName(std::string(kMaxWindowsServiceNameLength, 'a')).ok());
  EXPECT_EQ(CanonicalWindowsServiceName(std::string(kMaxWindowsServiceNameLength + 1, 'a')).status().code(),
            Code::kInvalidArgument);
}

TEST(WindowsServicePolicy, RefusesWhatWindowsNeedsAndOpensTheNodeDaemonsOnlyWhenAllowed) {
  for (const char* name : {"rpcss", "dcomlaunch", "lsm", "samss", "csi-proxy"}) {
    EXPECT_EQ(RefusalForWindowsService(name), UnitRefusal::kAlways) << name;
  }
  for (const char* name : {"kubelet", "kube-proxy", "containerd", "docker", "hns", "vmcompute", "winrm", "sshd",
                           "eventlog", "lanmanworkstation", "wuauserv"}) {
    EXPECT_EQ(RefusalForWindowsService(name), UnitRefusal::kUnlessAllowed) << name;
  }
  // Storage drivers start the iSCSI initiator: it stays open, as iscsid does on Linux.
  EXPECT_EQ(RefusalForWindowsService("msiscsi"), UnitRefusal::kNone);
  EXPECT_EQ(RefusalForWindowsService("csi-proxy-custom", "csi-proxy-custom"), UnitRefusal::kAlways);
  EXPECT_EQ(RefusalForService("kubelet", "", ServiceNaming::kWindows), UnitRefusal::kUnlessAllowed);
  EXPECT_EQ(RefusalForService("kubelet.service", "", ServiceNaming::kSystemd), UnitRefusal::kUnlessAllowed);
}

}  // namespace
}  // namespace csi_proxy::system

// The SMB input rules: remote paths in both slash styles, and what user names and passwords may hold.
#include "smb_validation.h"

#include <gtest/gtest.h>

namespace csi_proxy::smb {
namespace {

TEST(SmbRemotePath, BackslashesAndSlashesBothWork) {
  for (const char* path : {"\\\\Server\\Share", "//Server/Share", "\\\\Server/Share", "//Server\\Share\\"}) {
    auto remote = ParseRemotePath(path);
    ASSERT_TRUE(remote.ok()) << path << ": " << remote.status().message();
    EXPECT_EQ(remote->server, "server");
    EXPECT_EQ(remote->share, "share");
    EXPECT_TRUE(remote->subpath.empty());
    EXPECT_EQ(remote->MappingKey(), "//server/share");
  }
}

TEST(SmbRemotePath, SubPathIsKeptWithItsCase) {
  auto remote = ParseRemotePath("\\\\fs.example.com\\Data\\PVC-123\\Sub_dir");
  ASSERT_TRUE(remote.ok()) << remote.status().message();
  EXPECT_EQ(remote->MappingKey(), "//fs.example.com/data");
  EXPECT_EQ(remote->subpath, (std::vector<std::string>{"PVC-123", "Sub_dir"}));
}

TEST(SmbRemotePath, IpAddressesAndHiddenSharesAreAccepted) {
  auto remote = ParseRemotePath("//10.1.2.3/backup$");
  ASSERT_TRUE(remote.ok()) << remote.status().message();
  EXPECT_EQ(remote->server, "10.1.2.3");
  EXPECT_EQ(remote->share, "backup$");
}

TEST(SmbRemotePath, MalformedPathsAreRefused) {
  for (const char* path :
       {"", "\\\\server", "server", "//", "//999.1.1.1/share", "//-bad/share", "//server/.", "//server/..",
        "//server/$", "//server/share/../etc", "//server/share/./x", "//ser ver/share", "//server/sha re",
        "//server/share,seal", "//server/share=1", "//server;id/share", "//server/sh$are", "//server/share/a b"}) {
    EXPECT_EQ(ParseRemotePath(path).status().code(), Code::kInvalidArgument) << path;
  }
  EXPECT_EQ(ParseRemotePath("//server/" + std::string(81, 'a')).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseRemotePath("//server/share/" + std::string(1100, 'a')).status().code(), Code::kInvalidArgument);
}

TEST(SmbCredentials, DomainAndUserAreSplit) {
  auto creds = ParseCredentials("CORP\\svc-smb", "pw");
  ASSERT_TRUE(creds.ok()) << creds.status().message();
  EXPECT_EQ(creds->domain, "CORP");
  EXPECT_EQ(creds->username, "svc-smb");
  auto slash = ParseCredentials("corp.example/svc", "pw");
  ASSERT_TRUE(slash.ok());
  EXPECT_EQ(slash->domain, "corp.example");
  auto upn = ParseCredentials("svc@corp.example", "pw");
  ASSERT_TRUE(upn.ok());
  EXPECT_EQ(upn->username, "svc@corp.example");
  EXPECT_TRUE(upn->domain.empty());
  EXPECT_TRUE(ParseCredentials("NODE1$", "pw").ok());
}

TEST(SmbCredentials, NoUsernameMeansGuestAndRefusesAPassword) {
  auto guest = ParseCredentials("", "");
  ASSERT_TRUE(guest.ok());
  EXPECT_TRUE(guest->username.empty());
  EXPECT_EQ(ParseCredentials("", "secret").status().code(), Code::kInvalidArgument);
}

TEST(SmbCredentials, UserNamesThatCouldCarryOptionsAreRefused) {
  for (const char* user : {"a,b", "a=b", "user,password=x", "a b", "a;b", "a$b", "$(id)", "`id`", "\\user", "DOMAIN\\",
                           "DO MAIN\\user", "DOM,x\\user", "a\nb", "a'b", "a\"b", "a|b"}) {
    EXPECT_EQ(ParseCredentials(user, "pw").status().code(), Code::kInvalidArgument) << user;
  }
  EXPECT_EQ(ParseCredentials(std::string(257, 'u'), "pw").status().code(), Code::kInvalidArgument);
}

TEST(SmbCredentials, PasswordsMayHoldShellCharactersButNoControlCharacters) {
  auto creds = ParseCredentials("user", "p@ss,w0rd;$(id)`x` 'q\"|&<>*?=");
  ASSERT_TRUE(creds.ok()) << creds.status().message();
  EXPECT_EQ(creds->password, "p@ss,w0rd;$(id)`x` 'q\"|&<>*?=");
  EXPECT_TRUE(ParseCredentials("user", "p\xc3\xa4ss").ok());  // UTF-8
  for (const std::string& bad : {std::string("a\nb"), std::string("a\tb"), std::string("a\0b", 3), std::string("a\x7f"),
                                 std::string(257, 'p')}) {
    auto status = ParseCredentials("user", bad).status();
    EXPECT_EQ(status.code(), Code::kInvalidArgument);
    EXPECT_EQ(status.message().find(bad), std::string::npos);
  }
}

}  // namespace
}  // namespace csi_proxy::smb

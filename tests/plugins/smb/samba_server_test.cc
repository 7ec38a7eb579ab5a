// The Samba test fixture itself: a real smbd on loopback that smbclient can use, and that refuses a wrong
// password. If these fail, the SMB group's end-to-end tests cannot mean anything.
#include "samba_server.h"

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace csi_proxy::test_support {
namespace {

#define START_SAMBA_OR_SKIP(var, options)                 \
  std::string why_not_##var;                              \
  auto var = SambaServer::Start(options, &why_not_##var); \
  if (!var) GTEST_SKIP() << "no Samba server: " << why_not_##var

TEST(SambaServerFixture, SmbclientWritesAndReadsTheShare) {
  START_SAMBA_OR_SKIP(server, SambaServerOptions{});
  std::ofstream(server->share_dir() + "/on-server.txt") << "from the server side";
  std::string local_copy = server->share_dir() + "/../copy.txt";
  std::string upload = server->share_dir() + "/../upload-src.txt";
  std::ofstream(upload) << "from the client side";

  auto result = server->Smbclient("get on-server.txt " + local_copy + "; put " + upload + " uploaded.txt; ls",
                                  server->username(), server->password());
  ASSERT_EQ(result.exit_code, 0) << result.output << "\n" << server->Log();
  std::ifstream copy(local_copy);
  std::stringstream copied;
  copied << copy.rdbuf();
  EXPECT_EQ(copied.str(), "from the server side");
  std::ifstream uploaded(server->share_dir() + "/uploaded.txt");
  std::stringstream up;
  up << uploaded.rdbuf();
  EXPECT_EQ(up.str(), "from the client side");
}

TEST(SambaServerFixture, WrongPasswordIsRefused) {
  START_SAMBA_OR_SKIP(server, SambaServerOptions{});
  auto result = server->Smbclient("ls", server->username(), "not-the-password");
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.output.find("NT_STATUS_LOGON_FAILURE"), std::string::npos) << result.output;
}

TEST(SambaServerFixture, EncryptionCanBeRequired) {
  SambaServerOptions options;
  options.require_encryption = true;
  START_SAMBA_OR_SKIP(server, options);
  auto result = server->Smbclient("ls", server->username(), server->password());
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

TEST(SambaServerFixture, StoppingTheServerEndsAllItsProcesses) {
  pid_t pid;
  {
    START_SAMBA_OR_SKIP(server, SambaServerOptions{});
    pid = server->pid();
    // A connection makes smbd fork a child for it.
    ASSERT_EQ(server->Smbclient("ls", server->username(), server->password()).exit_code, 0);
  }
  EXPECT_NE(kill(-pid, 0), 0) << "processes of the server's group survived";
}

}  // namespace
}  // namespace csi_proxy::test_support

// How ConnectTarget puts CHAP settings into open-iscsi's node record without any argv: the record text is
// rewritten. Checked on the text real iscsiadm writes, and on a record iscsiadm itself created.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "iscsi_backend_linux.h"
#include "run_program.h"

namespace csi_proxy::iscsi {
namespace {

constexpr const char* kRecord =
    "# BEGIN RECORD 2.1.8\n"
    "node.name = iqn.2024-01.io.example:t0\n"
    "node.tpgt = -1\n"
    "node.startup = automatic\n"
    "node.session.auth.authmethod = None\n"
    "node.session.auth.chap_algs = MD5\n"
    "node.conn[0].address = 127.0.0.1\n"
    "# END RECORD\n";

TEST(IscsiNodeRecord, ChapSettingsReplaceOldValuesAndGoBeforeTheEndMarker) {
  std::string out = RewriteNodeRecord(kRecord, {{"node.startup", "manual"},
                                                {"node.session.auth.authmethod", "CHAP"},
                                                {"node.session.auth.username", "user"},
                                                {"node.session.auth.password", "p@ss;$(x)"},
                                                {"node.session.auth.password_in", std::nullopt}});
  EXPECT_EQ(out,
            "# BEGIN RECORD 2.1.8\n"
            "node.name = iqn.2024-01.io.example:t0\n"
            "node.tpgt = -1\n"
            "node.session.auth.chap_algs = MD5\n"
            "node.conn[0].address = 127.0.0.1\n"
            "node.startup = manual\n"
            "node.session.auth.authmethod = CHAP\n"
            "node.session.auth.username = user\n"
            "node.session.auth.password = p@ss;$(x)\n"
            "# END RECORD\n");
}

TEST(IscsiNodeRecord, RemovedSettingsDisappear) {
  std::string with_secret = RewriteNodeRecord(kRecord, {{"node.session.auth.password", "secret-1"}});
  ASSERT_NE(with_secret.find("secret-1"), std::string::npos);
  std::string cleared = RewriteNodeRecord(with_secret, {{"node.session.auth.password", std::nullopt}});
  EXPECT_EQ(cleared.find("secret-1"), std::string::npos);
  EXPECT_EQ(cleared, kRecord);
}

// The file layout and syntax come from real iscsiadm: it creates the record, we rewrite it, iscsiadm reads it
// back. Uses open-iscsi's node database (/etc/iscsi/nodes) with a test-only IQN and removes what it created.
TEST(IscsiNodeRecord, IscsiadmReadsTheRewrittenRecord) {
  auto iscsiadm = common::FindSystemProgram("iscsiadm");
  if (!iscsiadm.ok() || geteuid() != 0) GTEST_SKIP() << "needs root and iscsiadm (open-iscsi)";
  const std::string db = "/etc/iscsi/nodes";
  const std::string iqn = "iqn.2024-01.io.k8s.csi-proxy.test:record-" + std::to_string(getpid());
  struct Cleanup {
    std::string db, iqn;
    bool db_existed, ifaces_existed;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(db + "/" + iqn, ec);
      if (!db_existed) std::filesystem::remove(db, ec);  // only if empty
      if (!ifaces_existed) std::filesystem::remove("/etc/iscsi/ifaces", ec);
    }
  } cleanup{db, iqn, std::filesystem::exists(db), std::filesystem::exists("/etc/iscsi/ifaces")};

  auto created = common::RunProgram({*iscsiadm, "-m", "node", "-T", iqn, "-p", "127.0.0.1:3260", "-o", "new"});
  ASSERT_TRUE(created.ok());
  ASSERT_EQ(created->exit_code, 0) << created->output;
  std::string file = db + "/" + iqn + "/127.0.0.1,3260";
  ASSERT_TRUE(std::filesystem::is_regular_file(file)) << "iscsiadm changed its record layout";
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  in.close();
  std::ofstream(file, std::ios::trunc) << RewriteNodeRecord(
      text.str(), {{"node.session.auth.authmethod", "CHAP"}, {"node.session.auth.username", "chapuser"}});

  auto shown = common::RunProgram({*iscsiadm, "-m", "node", "-T", iqn, "-p", "127.0.0.1:3260"});
  ASSERT_TRUE(shown.ok());
  EXPECT_NE(shown->output.find("node.session.auth.authmethod = CHAP"), std::string::npos) << shown->output;
  EXPECT_NE(shown->output.find("node.session.auth.username = chapuser"), std::string::npos) << shown->output;
}

TEST(IscsiInitiatorName, OpenIscsisNameIsUsedWhenPresent) {
  char tmpl[] = "/tmp/csi-proxy-initiatorname-XXXXXX";
  int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(tmpl) << "## generated\nInitiatorName=iqn.1993-08.org.debian:01:abcdef\n";
  EXPECT_EQ(DefaultInitiatorName(tmpl), "iqn.1993-08.org.debian:01:abcdef");
  unlink(tmpl);
  EXPECT_EQ(DefaultInitiatorName("/nonexistent").rfind("iqn.2024-01.io.k8s.csi-proxy:", 0), 0u);
}

}  // namespace
}  // namespace csi_proxy::iscsi

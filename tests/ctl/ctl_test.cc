// csi-proxyctl as an administrator runs it: against a real host, through the admin socket and the endpoints.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <thread>

#include "host_process.h"
#include "run_program.h"

namespace csi_proxy::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

const char* kFilesystem = "[groups.filesystem]\nenabled = true\nrequired = true\n";
const char* kEcho = "[groups.echo]\nenabled = true\n";

struct CtlRun {
  int code = -1;
  std::string output;
};

// Runs build/bin/csi-proxyctl with `args` against `host`'s configuration.
CtlRun Ctl(const HostProcess& host, std::vector<std::string> args, std::optional<std::string> input = std::nullopt) {
  std::vector<std::string> argv = {BuildDir() + "/bin/csi-proxyctl", "--config", host.config_path()};
  argv.insert(argv.end(), args.begin(), args.end());
  common::ProgramOptions options;
  options.stdin_data = std::move(input);
  auto run = common::RunProgram(argv, options);
  if (!run.ok()) return {-1, run.status().message()};
  return {run->exit_code, run->output};
}

// JSON printed with whitespace, compared without it.
std::string Squeeze(const std::string& s) { return std::regex_replace(s, std::regex("\\s+"), ""); }

TEST(Ctl, StatusListsTheGroupsAndEndpointsOfTheRunningHost) {
  HostProcess host(std::string(kFilesystem) + kEcho);
  ASSERT_TRUE(host.Start({"csi-proxy-filesystem-v1", "csi-proxy-echo-v1"})) << host.error();
  CtlRun run = Ctl(host, {"status"});
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("endpoints in " + host.endpoint_dir()));
  EXPECT_THAT(run.output, HasSubstr("group filesystem (filesystem): serving, required"));
  EXPECT_THAT(run.output, HasSubstr("group echo (echo): serving\n"));
  for (const char* e : {"csi-proxy-filesystem-v1", "csi-proxy-filesystem-v1beta1", "csi-proxy-echo-v1alpha1"}) {
    EXPECT_THAT(run.output, HasSubstr(e)) << e;
  }
  EXPECT_THAT(run.output, HasSubstr("plugin version"));
  EXPECT_THAT(run.output, HasSubstr("0 in flight"));

  run = Ctl(host, {"status", "--json"});
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_THAT(Squeeze(run.output), HasSubstr("\"endpoint_dir\":\"" + host.endpoint_dir() + "\""));
}

TEST(Ctl, StatusSaysWhatAConfinedGroupMayDo) {
  HostProcess host(std::string(kFilesystem) + kEcho +
                   "isolation = \"process\"\ncapabilities = [\"CAP_SYS_ADMIN\"]\nmax_tasks = 64\n");
  ASSERT_TRUE(host.Start({"csi-proxy-filesystem-v1", "csi-proxy-echo-v1"})) << host.error();
  CtlRun run = Ctl(host, {"status"});
  ASSERT_EQ(run.code, 0) << run.output;
  const std::string echo = run.output.substr(run.output.find("group echo"));
  const std::string filesystem = run.output.substr(run.output.find("group filesystem"));
  EXPECT_THAT(echo, HasSubstr("  privileges      capabilities: CAP_SYS_ADMIN; user: root; no_new_privs; seccomp: "));
  EXPECT_THAT(echo, HasSubstr(" system calls refused, signals to the host refused (EPERM); limits: memory 512 MiB, open files 4096, tasks 64\n"));
  // A group whose table confines nothing runs with the host's privileges: no line claims otherwise.
  EXPECT_THAT(filesystem.substr(0, filesystem.find("\ngroup ")), Not(HasSubstr("\n  privileges ")));

  run = Ctl(host, {"status", "--json"});
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_THAT(Squeeze(run.output), HasSubstr("\"privileges\":\"capabilities:CAP_SYS_ADMIN;user:root;"));
}

TEST(Ctl, ReloadChangesWhatIsServedAndARefusalExitsNonZero) {
  HostProcess host(kEcho);
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1"})) << host.error();
  host.WriteConfig(std::string(kEcho) + kFilesystem);
  CtlRun run = Ctl(host, {"reload"});
  EXPECT_EQ(run.code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("applied: group 'filesystem' enabled"));
  EXPECT_TRUE(SocketAccepts(host.endpoint("csi-proxy-filesystem-v1")));
  EXPECT_THAT(Ctl(host, {"status"}).output, HasSubstr("group filesystem"));

  host.WriteConfig(std::string(kEcho) + "[groups.filesystem]\nenabled = true\nno_such_key = 1\n");
  run = Ctl(host, {"reload"});
  EXPECT_EQ(run.code, 1) << run.output;
  EXPECT_THAT(run.output, HasSubstr("reload refused, nothing changed"));
  EXPECT_TRUE(SocketAccepts(host.endpoint("csi-proxy-filesystem-v1")));
}

TEST(Ctl, CheckConfigExitCodeSaysWhetherAStartWouldSucceed) {
  HostProcess good(kEcho);  // not started: check-config only reads the file and loads the libraries
  CtlRun run = Ctl(good, {"check-config"});
  EXPECT_EQ(run.code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("a start would serve this configuration"));

  HostProcess bad("[groups.echo]\nenabled = true\nrequired = true\nlibrary = \"/nonexistent/libnothing.so\"\n");
  run = Ctl(bad, {"check-config"});
  EXPECT_EQ(run.code, 1) << run.output;
  EXPECT_THAT(run.output, HasSubstr("a start would be refused"));
}

TEST(Ctl, CallsAMethodWithAJsonRequestAndPrintsTheJsonAnswer) {
  HostProcess host(kFilesystem);
  ASSERT_TRUE(host.Start({"csi-proxy-filesystem-v1"})) << host.error();
  std::string path = host.kubelet_dir() + "/pods";
  fs::create_directories(path);
  CtlRun run = Ctl(host, {"call", "csi-proxy-filesystem-v1", "PathExists", "{\"path\": \"" + path + "\"}"});
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_EQ(Squeeze(run.output), "{\"exists\":true}");

  // The full path and a name without the prefix; a missing path answers false (printed, not left out).
  run = Ctl(host, {"call", "filesystem-v1", "/v1.Filesystem/PathExists", "{\"path\": \"" + path + "/none\"}"});
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_EQ(Squeeze(run.output), "{\"exists\":false}");

  // A mutating call, then its effect.
  run = Ctl(host, {"call", "csi-proxy-filesystem-v1", "Mkdir", "{\"path\": \"" + path + "/made\"}"});
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_TRUE(fs::is_directory(path + "/made"));

  // The group's refusal comes back with its code.
  run = Ctl(host, {"call", "csi-proxy-filesystem-v1", "PathExists", "{\"path\": \"/etc\"}"});
  EXPECT_EQ(run.code, 1);
  EXPECT_THAT(run.output, HasSubstr("PERMISSION_DENIED"));
}

TEST(Ctl, InvalidJsonOrAnUnknownMethodIsAClearError) {
  HostProcess host(kFilesystem);
  ASSERT_TRUE(host.Start({"csi-proxy-filesystem-v1"})) << host.error();
  CtlRun run = Ctl(host, {"call", "csi-proxy-filesystem-v1", "PathExists", "{\"path\": "});
  EXPECT_EQ(run.code, 1);
  EXPECT_THAT(run.output, HasSubstr("invalid JSON request"));
  run = Ctl(host, {"call", "csi-proxy-filesystem-v1", "PathExists", "{\"no_such_field\": 1}"});
  EXPECT_EQ(run.code, 1);
  EXPECT_THAT(run.output, HasSubstr("invalid JSON request"));
  run = Ctl(host, {"call", "csi-proxy-filesystem-v1", "Format", "{}"});
  EXPECT_EQ(run.code, 1);
  EXPECT_THAT(run.output, HasSubstr("no method Format"));
  EXPECT_THAT(run.output, HasSubstr("/v1.Filesystem/PathExists"));
  run = Ctl(host, {"call", "csi-proxy-nothing-v1", "PathExists"});
  EXPECT_EQ(run.code, 1);
  EXPECT_THAT(run.output, HasSubstr("NOT_FOUND"));
}

// The SMB group's password, sent through csi-proxyctl from standard input: audited, redacted. The mapping itself
// fails (nothing listens there, and this kernel may have no cifs at all); the audit line is written either way.
TEST(Ctl, ACallWithAPasswordIsAuditedWithThePasswordRedacted) {
  if (!fs::exists(PluginDir() + "/libcsi-proxy-smb.so")) GTEST_SKIP() << "the smb group library was not built";
  HostProcess host("");
  std::string audit = host.dir() + "/audit.log";
  host.WriteConfig("[groups.smb]\nrequired = true\n", "audit_log = \"" + audit + "\"\n");
  ASSERT_TRUE(host.Start({"csi-proxy-smb-v1"})) << host.error() << host.log();
  CtlRun run = Ctl(host, {"call", "csi-proxy-smb-v1", "NewSmbGlobalMapping", "-"},
                   R"({"remotePath": "//127.0.0.1/nothing", "username": "alice", "password": "hunter2-secret"})");
  EXPECT_EQ(run.code, 1) << run.output;
  EXPECT_THAT(run.output, Not(HasSubstr("hunter2-secret")));
  // The audit log's writer thread writes the line a moment after the answer.
  std::string text;
  for (int i = 0; i < 500 && text.find("method=/v1.Smb/NewSmbGlobalMapping ") == std::string::npos; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::ifstream in(audit);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  EXPECT_THAT(text, HasSubstr("method=/v1.Smb/NewSmbGlobalMapping "));
  EXPECT_THAT(text, HasSubstr("\"username\":\"alice\",\"password\":\"(redacted)\""));
  EXPECT_THAT(text, Not(HasSubstr("hunter2-secret")));
  EXPECT_THAT(host.log(), Not(HasSubstr("hunter2-secret")));
}

TEST(Ctl, AMissingOrForbiddenAdminSocketIsNamed) {
  HostProcess host(kEcho);  // not running: no admin socket
  CtlRun run = Ctl(host, {"status"});
  EXPECT_EQ(run.code, 1);
  EXPECT_THAT(run.output, HasSubstr("no admin socket at " + host.admin_socket()));
  EXPECT_THAT(run.output, HasSubstr("is csi-proxy running?"));

  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1"})) << host.error();
  struct stat st {};
  ASSERT_EQ(stat(host.admin_socket().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // As a user other than root (only root may switch: skip otherwise).
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run csi-proxyctl as another user";
  const char* setpriv = "/usr/bin/setpriv";
  if (access(setpriv, X_OK) != 0) GTEST_SKIP() << "needs setpriv (util-linux)";
  auto as_nobody =
      common::RunProgram({setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", BuildDir() + "/bin/csi-proxyctl",
                          "--admin-socket", host.admin_socket(), "status"});
  ASSERT_TRUE(as_nobody.ok()) << as_nobody.status().message();
  EXPECT_EQ(as_nobody->exit_code, 1) << as_nobody->output;
  EXPECT_THAT(as_nobody->output, HasSubstr("permission denied on the admin socket"));
}

}  // namespace
}  // namespace csi_proxy::testing

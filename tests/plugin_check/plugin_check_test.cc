// csi-proxy-plugin-check against a library with planted bugs (buggy_plugin.c): each bug fails the check that is
// meant to find it, naming it, and nothing else; without a bug every check passes; a fuzz failure comes back from
// its seed and input number alone; the JUnit report says the same as the text. The isolated checks (the library in
// csi-proxy-runner) fail a library that needs a privilege its group does not declare, or that crashes there, and
// are skipped when no runner is beside the kit. (The shipped groups and the example are checked by the
// plugin_check.<group> tests, tests/plugin_check/CMakeLists.txt.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "child_process.h"
#include "temp_dir.h"

namespace csi_proxy::testing {
namespace {

using ::testing::HasSubstr;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;  // the kit, built the same way, measures no resident memory
#else
constexpr bool kAddressSanitizer = false;
#endif

// Whether this process holds the capability `number` in its effective set (/proc/self/status CapEff).
bool HoldsCapability(int number) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("CapEff:", 0) == 0) return (std::stoull(line.substr(7), nullptr, 16) >> number) & 1;
  }
  return false;
}
constexpr int kCapNetRaw = 13;

struct KitRun {
  int exit_code = -1;
  std::string report;
  std::vector<std::string> failures;           // the FAIL lines but the isolated checks'
  std::vector<std::string> isolated_failures;  // the isolated checks' FAIL lines
};

class PluginCheckTest : public ::testing::Test {
 protected:
  // Runs the kit on the buggy library with `bug` planted, `group_keys` in its group's table and `extra` in its
  // [check] table.
  KitRun Run(const std::string& bug, std::vector<std::string> args = {}, const std::string& extra = "",
             const std::string& library = CSI_PROXY_BUGGY_LIBRARY, const std::string& group_keys = "",
             const std::string& kit = CSI_PROXY_PLUGIN_CHECK) {
    const std::string config = dir_.Write("buggy-" + bug + "-" + std::to_string(runs_) + ".toml",
                                          "[groups.buggy]\nbug = \"" + bug + "\"\n" + group_keys +
                                              "\n[check]\ncall_timeout_seconds = 2\nreloads = 5\n" + extra);
    std::vector<std::string> argv{kit, library, "--config", config, "--seconds", "2"};
    argv.insert(argv.end(), args.begin(), args.end());
    const std::string out = dir_.Sub("report-" + std::to_string(++runs_) + ".txt");
    auto child = ChildProcess::Start(argv, out);
    EXPECT_TRUE(child.ok()) << child.status().message();
    KitRun run;
    if (!child.ok()) return run;
    int status = 0;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(3);
    while (!child->Exited(&status)) {
      if (std::chrono::steady_clock::now() > give_up) {
        child->Kill();
        ADD_FAILURE() << "the kit did not finish in 3 minutes";
        return run;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::ifstream in(out);
    std::stringstream text;
    text << in.rdbuf();
    run.report = text.str();
    std::istringstream lines(run.report);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("FAIL  isolated: ", 0) == 0) {
        run.isolated_failures.push_back(line);
      } else if (line.rfind("FAIL  ", 0) == 0) {
        run.failures.push_back(line);
      }
    }
    return run;
  }

  TempDir dir_{"plugin-check-test"};
  int runs_ = 0;
};

TEST_F(PluginCheckTest, AConformingLibraryPassesEveryCheck) {
  KitRun run = Run("none");
  EXPECT_EQ(run.exit_code, 0) << run.report;
  EXPECT_TRUE(run.failures.empty()) << run.report;
  for (const char* check : {"abi: newest host", "abi: oldest host", "lifecycle: init and shutdown twice",
                            "lifecycle: reload twice", "leaks: file descriptors across 5 reloads",
                            "fuzz /v1.Buggy/Parse", "deadline /v1.Buggy/Slow", "concurrent /v1.Buggy/GetCount"}) {
    EXPECT_THAT(run.report, HasSubstr(std::string("PASS  ") + check + ":")) << run.report;
  }
  // Not measured in the sanitizer pass (see ALeakAcrossReloadsFailsBothLeakChecks).
  EXPECT_THAT(run.report, HasSubstr(std::string(kAddressSanitizer ? "SKIP" : "PASS") +
                                    "  leaks: resident memory across 5 reloads:"));
  EXPECT_TRUE(run.isolated_failures.empty()) << run.report;
  // In the runner, confined as a third party's group is by default; as root, as the host runs.
  if (geteuid() == 0) {
    EXPECT_THAT(run.report, HasSubstr("PASS  isolated: start in csi-proxy-runner: the runner (pid "));
    EXPECT_THAT(run.report, HasSubstr("confined itself (capabilities: none; user: root; no_new_privs; seccomp: "));
    for (const char* method : {"GetCount", "Parse", "Slow"}) {
      EXPECT_THAT(run.report, HasSubstr(std::string("PASS  isolated: calls /v1.Buggy/") + method +
                                        ": 5 requests (the sample and fuzz inputs 0 to 3) answered by the runner"));
    }
    EXPECT_THAT(run.report, HasSubstr("PASS  isolated: stop: the runner (pid "));
    EXPECT_THAT(run.report, HasSubstr("exited with status 0"));
    EXPECT_THAT(run.report, HasSubstr("no process and no zombie are left"));
    // And none is, after the kit.
    const size_t at = run.report.find("PASS  isolated: stop: the runner (pid ");
    if (at != std::string::npos) {
      const pid_t runner = static_cast<pid_t>(std::stol(run.report.substr(at + 38)));
      EXPECT_TRUE(kill(runner, 0) != 0 && errno == ESRCH) << "the runner " << runner << " is still there";
    }
  } else {
    EXPECT_THAT(run.report, HasSubstr("SKIP  isolated: start in csi-proxy-runner: the kit cannot confine the runner"));
  }
  EXPECT_THAT(run.report, HasSubstr("0 failed"));
}

TEST_F(PluginCheckTest, ALibraryNeedingAPrivilegeItsGroupDoesNotDeclareFailsTheIsolatedCheckOnly) {
  if (!HoldsCapability(kCapNetRaw)) {
    GTEST_SKIP() << "needs CAP_NET_RAW (root): the kit's own process must open the raw socket the runner may not";
  }
  KitRun run = Run("needs-net-raw");
  EXPECT_EQ(run.exit_code, 1) << run.report;
  EXPECT_TRUE(run.failures.empty()) << run.report;  // in the kit's process, as root, it works
  ASSERT_EQ(run.isolated_failures.size(), 1u) << run.report;
  EXPECT_THAT(run.isolated_failures[0],
              HasSubstr("FAIL  isolated: calls /v1.Buggy/GetCount: the sample request was answered INTERNAL "
                        "\"socket(AF_INET, SOCK_RAW): Operation not permitted\" by the runner (pid "));
  EXPECT_THAT(run.isolated_failures[0], HasSubstr("and OK in the kit's own process: the group's privileges "
                                                  "(capabilities: none; user: root;"));
  EXPECT_THAT(run.isolated_failures[0], HasSubstr("declare it in [groups.buggy]"));
  EXPECT_THAT(run.report, HasSubstr("PASS  isolated: calls /v1.Buggy/Parse:"));  // a new runner after the failure
  EXPECT_THAT(run.report, HasSubstr("PASS  isolated: stop:"));

  // Declared, the same library passes.
  KitRun declared = Run("needs-net-raw", {}, "", CSI_PROXY_BUGGY_LIBRARY, "capabilities = [\"CAP_NET_RAW\"]\n");
  EXPECT_EQ(declared.exit_code, 0) << declared.report;
  EXPECT_TRUE(declared.isolated_failures.empty()) << declared.report;
  EXPECT_THAT(declared.report, HasSubstr("confined itself (capabilities: CAP_NET_RAW;"));
  EXPECT_THAT(declared.report, HasSubstr("PASS  isolated: calls /v1.Buggy/GetCount:"));
}

TEST_F(PluginCheckTest, ACrashInTheRunnerFailsTheIsolatedCheckNamingTheSignal) {
  if (!HoldsCapability(kCapNetRaw)) {
    GTEST_SKIP() << "needs CAP_NET_RAW (root): the kit's own process must open the raw socket the runner may not";
  }
  KitRun run = Run("crash-without-net-raw");
  EXPECT_EQ(run.exit_code, 1) << run.report;
  EXPECT_TRUE(run.failures.empty()) << run.report;
  ASSERT_EQ(run.isolated_failures.size(), 1u) << run.report;
  EXPECT_THAT(run.isolated_failures[0], HasSubstr("FAIL  isolated: calls /v1.Buggy/GetCount: the runner (pid "));
  // Under AddressSanitizer its own handler takes the SIGSEGV, reports it and exits with status 1.
  EXPECT_THAT(run.isolated_failures[0],
              HasSubstr(kAddressSanitizer ? "ended (exited with status 1)" : "ended (killed by signal 11 (SIGSEGV)"));
  EXPECT_THAT(run.isolated_failures[0], HasSubstr("during the sample request; the call was answered UNAVAILABLE"));
  // Stopped after the crash with nothing left, and a new runner serves the next checks.
  EXPECT_THAT(run.isolated_failures[0], ::testing::Not(HasSubstr("stopping it:")));
  EXPECT_THAT(run.report, HasSubstr("PASS  isolated: calls /v1.Buggy/Slow:"));
  EXPECT_THAT(run.report, HasSubstr("PASS  isolated: stop:"));
}

TEST_F(PluginCheckTest, TheIsolatedChecksAreSkippedWhenNoRunnerIsBesideTheKit) {
  const std::string alone = dir_.MakeDir("bin-without-runner") + "/csi-proxy-plugin-check";
  std::filesystem::copy_file(CSI_PROXY_PLUGIN_CHECK, alone);
  KitRun run = Run("none", {}, "", CSI_PROXY_BUGGY_LIBRARY, "", alone);
  EXPECT_EQ(run.exit_code, 0) << run.report;
  EXPECT_THAT(run.report, HasSubstr("SKIP  isolated: start in csi-proxy-runner: csi-proxy-runner is not beside the "
                                    "kit (" +
                                    dir_.Sub("bin-without-runner/csi-proxy-runner") + ")"));
  EXPECT_THAT(run.report, HasSubstr("SKIP  isolated: calls /v1.Buggy/Parse: csi-proxy-runner is not beside the kit"));
  EXPECT_THAT(run.report, HasSubstr("SKIP  isolated: stop: csi-proxy-runner is not beside the kit"));
  EXPECT_THAT(run.report, HasSubstr("PASS  fuzz /v1.Buggy/Parse:"));  // the other checks run as before
}

TEST_F(PluginCheckTest, ARaceBetweenConcurrentCallsFailsTheConcurrencyCheck) {
  KitRun run = Run("race");
  EXPECT_EQ(run.exit_code, 1) << run.report;
  ASSERT_EQ(run.failures.size(), 1u) << run.report;
  EXPECT_THAT(run.failures[0], HasSubstr("FAIL  concurrent /v1.Buggy/GetCount: the library's process was killed by "
                                         "SIGABRT"));
  // Called one at a time, the same method passes: the report tells a race from a plain crash.
  EXPECT_THAT(run.report, HasSubstr("PASS  fuzz /v1.Buggy/GetCount:"));
}

TEST_F(PluginCheckTest, ACrashOnAMalformedRequestFailsTheFuzzCheckAndComesBackFromItsSeed) {
  KitRun run = Run("crash", {"--seed", "42"});
  EXPECT_EQ(run.exit_code, 1) << run.report;
  ASSERT_EQ(run.failures.size(), 1u) << run.report;
  EXPECT_THAT(run.failures[0], HasSubstr("FAIL  fuzz /v1.Buggy/Parse: the library's process was killed by SIGSEGV"));
  const size_t at = run.failures[0].find("during input #");
  ASSERT_NE(at, std::string::npos) << run.failures[0];
  const std::string input = run.failures[0].substr(at + 14, run.failures[0].find(' ', at + 14) - (at + 14));
  ASSERT_FALSE(input.empty()) << run.failures[0];
  EXPECT_THAT(run.report, HasSubstr("--seed 42"));
  // The deadline and concurrency checks of the same method run in a fresh process after the crash.
  EXPECT_THAT(run.report, HasSubstr("PASS  deadline /v1.Buggy/Parse:"));
  // The isolated check's few inputs of seed 42 may meet the crash too: then it names the runner's signal.
  for (const auto& line : run.isolated_failures) {
    EXPECT_THAT(line, HasSubstr("FAIL  isolated: calls /v1.Buggy/Parse: the runner (pid ")) << run.report;
    EXPECT_THAT(line, HasSubstr("ended (killed by signal 11 (SIGSEGV)")) << run.report;
    EXPECT_THAT(line, HasSubstr("during input #")) << run.report;
  }

  KitRun again = Run("crash", {"--seed", "42", "--only", "fuzz /v1.Buggy/Parse", "--input", input});
  ASSERT_EQ(again.failures.size(), 1u) << again.report;
  EXPECT_THAT(again.failures[0], HasSubstr("killed by SIGSEGV"));
  EXPECT_THAT(again.failures[0], HasSubstr("input #" + input + " ("));
  EXPECT_THAT(again.failures[0], HasSubstr(", hex "));  // the bytes, to write a regression test from
}

TEST_F(PluginCheckTest, AHandlerThatNeverReturnsFailsTheFuzzCheckNamingTheInput) {
  KitRun run = Run("hang");
  EXPECT_EQ(run.exit_code, 1) << run.report;
  ASSERT_EQ(run.failures.size(), 1u) << run.report;
  EXPECT_THAT(run.failures[0], HasSubstr("FAIL  fuzz /v1.Buggy/Parse: no result in time: the library's process hung "
                                         "and was killed, during input #"));
}

TEST_F(PluginCheckTest, ALeakAcrossReloadsFailsBothLeakChecks) {
  KitRun run = Run("leak");
  EXPECT_EQ(run.exit_code, 1) << run.report;
  ASSERT_FALSE(run.failures.empty()) << run.report;
  EXPECT_THAT(run.failures[0], HasSubstr("FAIL  leaks: file descriptors across 5 reloads: 5 reloads left 6 file "
                                         "descriptors open that were not before"));
  EXPECT_THAT(run.failures[0], HasSubstr("-> /dev/null"));
  if (kAddressSanitizer) {
    // Built with AddressSanitizer (the sanitizer pass), the kit measures no resident memory: the quarantine keeps
    // what is freed.
    EXPECT_EQ(run.failures.size(), 1u) << run.report;
    EXPECT_THAT(run.report,
                HasSubstr("SKIP  leaks: resident memory across 5 reloads: resident memory is not measured"));
    return;
  }
  ASSERT_EQ(run.failures.size(), 2u) << run.report;
  EXPECT_THAT(run.failures[1], HasSubstr("FAIL  leaks: resident memory across 5 reloads: resident memory grew by 4"));
  EXPECT_THAT(run.failures[1], HasSubstr("shutdown does not free what init took"));
}

TEST_F(PluginCheckTest, ACompletionAfterTheHostAnsweredAtTheDeadlineMustNotBeASecondOne) {
  KitRun run = Run("late-twice");
  EXPECT_EQ(run.exit_code, 1) << run.report;
  ASSERT_EQ(run.failures.size(), 1u) << run.report;
  EXPECT_THAT(run.failures[0], HasSubstr("FAIL  deadline /v1.Buggy/Slow: the library completed a call twice after the "
                                         "host had answered it"));
}

TEST_F(PluginCheckTest, AnInstanceThatCannotStartBesideTheServingOneFailsTheReloadCheck) {
  KitRun run = Run("socket");
  EXPECT_EQ(run.exit_code, 1) << run.report;
  ASSERT_FALSE(run.failures.empty()) << run.report;
  EXPECT_THAT(run.failures[0], HasSubstr("FAIL  lifecycle: reload twice: reload 1: the new instance, loaded beside the "
                                         "serving one: "));
  EXPECT_THAT(run.failures[0], HasSubstr("cannot bind the group's socket: Address already in use"));
  // One instance at a time is fine.
  EXPECT_THAT(run.report, HasSubstr("PASS  lifecycle: init and shutdown twice:"));
}

TEST_F(PluginCheckTest, ALibraryThatRefusesTheOldestHostFailsThatAbiCheckOnly) {
  KitRun run = Run("none", {}, "", CSI_PROXY_BUGGY_V2_LIBRARY);
  EXPECT_EQ(run.exit_code, 1) << run.report;
  ASSERT_EQ(run.failures.size(), 1u) << run.report;
  EXPECT_THAT(run.failures[0], HasSubstr("FAIL  abi: oldest host: a host of ABI version 1 cannot load it: "));
  EXPECT_THAT(run.failures[0], HasSubstr("the library speaks ABI version 2; this host speaks 1 to 1"));
  EXPECT_THAT(run.report, HasSubstr("PASS  abi: newest host: negotiated ABI version 2"));
}

TEST_F(PluginCheckTest, TheJUnitReportSaysWhatTheTextSays) {
  const std::string junit = dir_.Sub("report.xml");
  KitRun run = Run("race", {"--junit", junit});
  ASSERT_EQ(run.failures.size(), 1u) << run.report;
  std::ifstream in(junit);
  std::stringstream xml;
  xml << in.rdbuf();
  EXPECT_THAT(xml.str(), HasSubstr("failures=\"1\""));
  EXPECT_THAT(xml.str(), HasSubstr("name=\"concurrent /v1.Buggy/GetCount\""));
  EXPECT_THAT(xml.str(), HasSubstr("<failure message=\"the library's process was killed by SIGABRT"));
}

TEST_F(PluginCheckTest, AMisspeltCheckKeyIsRefusedBeforeAnythingRuns) {
  KitRun run = Run("none", {}, "fuzz_mutatin = true\n");
  EXPECT_EQ(run.exit_code, 2) << run.report;
  EXPECT_THAT(run.report, HasSubstr("[check] fuzz_mutatin is not a key of [check]"));
}

}  // namespace
}  // namespace csi_proxy::testing

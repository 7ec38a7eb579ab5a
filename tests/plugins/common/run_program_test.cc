// RunProgram is the only way plugins start other programs: argv only, scrubbed environment, bounded time.
#include "run_program.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace csi_proxy::common {
namespace {

TEST(RunProgram, PassesArgumentsVerbatimWithoutAShell) {
  auto r = RunProgram({"/bin/echo", "a b", "$(touch /tmp/should-not-exist)", ";", "|"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->output, "a b $(touch /tmp/should-not-exist) ; |\n");
}

TEST(RunProgram, ScrubsTheEnvironment) {
  setenv("CSI_PROXY_SECRET_FOR_TEST", "hunter2", 1);
  auto r = RunProgram({"/usr/bin/env"}, {.extra_env = {"EXTRA=1"}});
  unsetenv("CSI_PROXY_SECRET_FOR_TEST");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->output, "PATH=/usr/sbin:/usr/bin:/sbin:/bin\nLC_ALL=C\nEXTRA=1\n");
}

TEST(RunProgram, FeedsStdinWithoutArgv) {
  auto r = RunProgram({"/bin/cat"}, {.stdin_data = std::string("secret-on-stdin")});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->output, "secret-on-stdin");
}

TEST(RunProgram, KillsAProgramThatOverrunsItsTimeout) {
  auto r = RunProgram({"/bin/sleep", "30"}, {.timeout = std::chrono::milliseconds(200)});
  EXPECT_EQ(r.status().code(), Code::kDeadlineExceeded);
}

TEST(RunProgram, StopsTheProgramAndWhatItStartedWhenTheCallIsCancelled) {
  auto begin = std::chrono::steady_clock::now();
  auto cancel_at = begin + std::chrono::milliseconds(200);
  // The shell starts a helper and waits for it, as mount helpers do.
  auto r = RunProgram({"/bin/sh", "-c", "sleep 30 & wait"},
                      {.cancelled = [&] { return std::chrono::steady_clock::now() > cancel_at; }});
  EXPECT_EQ(r.status().code(), Code::kCancelled) << r.status().message();
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(5));
}

TEST(RunProgram, BoundsTheWaitForAProgramThatClosedItsOutputAndHangs) {
  auto begin = std::chrono::steady_clock::now();
  auto r = RunProgram({"/bin/sh", "-c", "exec >/dev/null 2>&1; sleep 30"}, {.timeout = std::chrono::milliseconds(300)});
  EXPECT_EQ(r.status().code(), Code::kDeadlineExceeded) << r.status().message();
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(5));
}

TEST(RunProgram, RefusesARelativeProgramPath) { EXPECT_EQ(RunProgram({"echo", "x"}).status().code(), Code::kInternal); }

TEST(RunProgramChecked, ReportsExitStatusAndOutput) {
  Status s = RunProgramChecked({"/bin/sh", "-c", "echo boom >&2; exit 3"});
  EXPECT_EQ(s.code(), Code::kInternal);
  EXPECT_EQ(s.message(), "sh exited with status 3: boom");
}

TEST(FindSystemProgram, LooksOnlyInSystemDirectories) {
  auto p = FindSystemProgram("sh");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(*p == "/usr/bin/sh" || *p == "/bin/sh") << *p;
  EXPECT_EQ(FindSystemProgram("../bin/sh").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(FindSystemProgram("no-such-program-csi").status().code(), Code::kFailedPrecondition);
}

}  // namespace
}  // namespace csi_proxy::common

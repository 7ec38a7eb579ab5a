// Groups in processes of their own (isolation = "process"), tried through the real host and its sockets: a group
// whose library crashes, aborts, exits, hangs, leaks until its limit, is killed as by the OOM killer or closes
// descriptors it does not own fails only its own calls in flight, UNAVAILABLE with a message naming the group and
// how its runner ended; another group's clients see nothing; the group serves again from a new runner within a
// bound, and nothing is left behind (no runner, no zombie, no descriptor in the host). A group that keeps crashing
// is marked failed (status, health) until a reload. The shipped groups and the SDK's example answer the same
// isolated as in process.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <set>
#include <sstream>
#include <thread>

#include "csi_proxy/admin/v1/admin.grpc.pb.h"
#include "grpc_client.h"
#include "host_process.h"
#include "loopback_port.h"
#include "metrics_scrape.h"
#include "v1/echo.pb.h"

namespace csi_proxy::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

const std::string kCrasher = "csi-proxy-crasher-v1";
const std::string kEcho = "csi-proxy-echo-v1";

std::string CrasherGroup(const std::string& extra = "") {
  return "[groups.crasher]\nlibrary = \"" + BuildDir() + "/tests/fixtures/libcsi-proxy-crasher.so\"\n" +
         "isolation = \"process\"\n" + extra;
}

v1::EchoRequest Req(const std::string& text = "") {
  v1::EchoRequest r;
  r.set_text(text);
  return r;
}

// The pid the crasher's library runs in, or -1 when the call failed.
pid_t CrasherPid(const std::shared_ptr<grpc::Channel>& channel) {
  v1::EchoResponse resp;
  auto s = Call(channel, "/v1.Crasher/Pid", Req(), &resp, milliseconds(2000));
  return s.ok() ? static_cast<pid_t>(std::stol(resp.text())) : -1;
}

// Waits (bounded) until the crasher answers from a runner other than `old_pid`.
pid_t WaitForNewRunner(const std::shared_ptr<grpc::Channel>& channel, pid_t old_pid, milliseconds bound) {
  auto deadline = Clock::now() + bound;
  while (Clock::now() < deadline) {
    pid_t pid = CrasherPid(channel);
    if (pid > 0 && pid != old_pid) return pid;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return -1;
}

int CountFds(pid_t pid) {
  int n = 0;
  std::error_code ec;
  for (auto it = fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    ++n;
  }
  return n;
}

// The host's children: runners alive or not yet reaped (zombies).
std::vector<pid_t> ChildrenOf(pid_t pid) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream children(task.path() / "children");
    for (pid_t child; children >> child;) out.push_back(child);
  }
  return out;
}

bool Gone(pid_t pid) { return kill(pid, 0) != 0 && errno == ESRCH; }

admin::v1::GroupStatus StatusOf(HostProcess& host, const std::string& group) {
  auto admin = admin::v1::Admin::NewStub(Dial(host.admin_socket()));
  grpc::ClientContext ctx;
  admin::v1::StatusResponse status;
  if (admin->Status(&ctx, admin::v1::StatusRequest(), &status).ok()) {
    for (const auto& g : status.groups()) {
      if (g.name() == group) return g;
    }
  }
  return {};
}

// grpc.health.v1.Health/Check of the endpoint as a whole: "SERVING", "NOT_SERVING" or the failure.
std::string HealthOf(const std::string& socket) {
  std::string response;
  auto s = CallRaw(Dial(socket), "/grpc.health.v1.Health/Check", "", &response, milliseconds(5000));
  if (!s.ok()) return "error: " + s.error_message();
  if (response == std::string("\x08\x01", 2)) return "SERVING";
  if (response == std::string("\x08\x02", 2)) return "NOT_SERVING";
  return "unexpected answer";
}

// Calls the echo group in a loop on a thread of its own until stopped; counts calls and failures.
class ClientLoop {
 public:
  explicit ClientLoop(const std::string& socket) : channel_(Dial(socket)) {
    thread_ = std::thread([this] {
      while (!stop_) {
        v1::EchoResponse resp;
        auto s = Call(channel_, "/v1.Echo/Echo", Req("ping"), &resp, milliseconds(5000));
        ++calls_;
        if (!s.ok() || resp.text() != "ping") {
          ++failures_;
          last_failure_ = s.error_message();
        }
      }
    });
  }
  ~ClientLoop() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int calls() const { return calls_; }
  int failures() const { return failures_; }
  std::string last_failure() const { return last_failure_; }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::atomic<bool> stop_{false};
  std::atomic<int> calls_{0}, failures_{0};
  std::string last_failure_;
  std::thread thread_;
};

struct CrashCase {
  const char* method;
  const char* how;  // what the answer and the log say of the runner's end
  bool caught;      // a fatal signal the runner's handler sees: the host's line names the method it ran
};

class IsolatedCrash : public ::testing::TestWithParam<CrashCase> {};

TEST_P(IsolatedCrash, FailsOnlyItsOwnCallsAndTheGroupServesAgain) {
#ifdef __SANITIZE_ADDRESS__
  // Its own handlers report these (and exit 1), and it reserves more address space than the leak's limit allows.
  if (std::string(GetParam().method) == "Leak" || std::string(GetParam().method).starts_with("Segfault")) {
    GTEST_SKIP() << "under AddressSanitizer, which takes SIGSEGV and allocation failures itself";
  }
#endif
  const uint16_t port = test_support::FreeLoopbackPort();
  HostOptions options;
  options.launcher = {"/usr/bin/prlimit", "--core=0", "--"};  // the runners inherit it: no core file left behind
  HostProcess host(CrasherGroup("hang_restart_seconds = 1\n") + "[groups.echo]\n",
                   "metrics_address = \"127.0.0.1:" + std::to_string(port) + "\"\n", options);
  ASSERT_TRUE(host.Start({kCrasher, kEcho})) << host.error();
  auto crasher = Dial(host.endpoint(kCrasher));
  const pid_t first = CrasherPid(crasher);
  ASSERT_GT(first, 0);
  ASSERT_NE(first, host.pid());  // the library runs in a process of its own
  ClientLoop others(host.endpoint(kEcho));
  std::this_thread::sleep_for(milliseconds(200));
  const int fds_before = CountFds(host.pid());

  v1::EchoResponse resp;
  // The hang's deadline is short (its runner is killed a second after it); the others have time to end their runner.
  const bool hang = std::string(GetParam().method).starts_with("Hang");
  auto crashed =
      Call(crasher, std::string("/v1.Crasher/") + GetParam().method, Req(), &resp, milliseconds(hang ? 1000 : 15000));
  EXPECT_FALSE(crashed.ok());
  if (hang) {
    EXPECT_EQ(crashed.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << crashed.error_message();
  } else {
    EXPECT_EQ(crashed.error_code(), grpc::StatusCode::UNAVAILABLE) << crashed.error_message();
    EXPECT_NE(crashed.error_message().find("group 'crasher'"), std::string::npos) << crashed.error_message();
    EXPECT_NE(crashed.error_message().find(GetParam().how), std::string::npos) << crashed.error_message();
  }

  const pid_t second = WaitForNewRunner(crasher, first, milliseconds(10000));
  ASSERT_GT(second, 0) << host.log();
  EXPECT_TRUE(Gone(first)) << "the crashed runner is reaped, not a zombie";
  EXPECT_EQ(ChildrenOf(host.pid()), std::vector<pid_t>{second});
  std::this_thread::sleep_for(milliseconds(300));
  others.Stop();
  EXPECT_GT(others.calls(), 0);
  EXPECT_EQ(others.failures(), 0) << others.last_failure();
  EXPECT_EQ(CountFds(host.pid()), fds_before) << "the old runner's socket and pidfd are closed";
  EXPECT_NE(host.log().find("group 'crasher': its runner (pid " + std::to_string(first) + ") "), std::string::npos)
      << host.log();
  EXPECT_NE(host.log().find(GetParam().how), std::string::npos) << host.log();
#ifndef __SANITIZE_ADDRESS__  // whose own handler reports a crash
  if (GetParam().caught) {
    // One line, the host's, with what the runner knew: the library code the crashing thread ran.
    const std::string line = std::string(GetParam().how) + " while its library ran /v1.Crasher/" + GetParam().method;
    const std::string log = host.log();
    ASSERT_NE(log.find(line + "; restarting it"), std::string::npos) << log;
    EXPECT_NE(crashed.error_message().find(line), std::string::npos) << crashed.error_message();
  }
#endif

  admin::v1::GroupStatus status = StatusOf(host, "crasher");
  EXPECT_EQ(status.isolation(), "process");
  EXPECT_EQ(status.runner_pid(), second);
  EXPECT_EQ(status.restarts(), 1u);
  EXPECT_EQ(status.state(), "serving");
  std::string metrics = Scrape(port);
  EXPECT_EQ(Value(metrics, "csi_proxy_group_restarts_total", {{"group", "crasher"}}), 1) << metrics;
  EXPECT_EQ(Value(metrics, "csi_proxy_group_runner_up", {{"group", "crasher"}}), 1) << metrics;

  EXPECT_EQ(host.Stop(), 0) << host.log();
  EXPECT_TRUE(Gone(second)) << "the runner ends with the host";
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, IsolatedCrash,
    ::testing::Values(
        CrashCase{"Segfault", "killed by signal 11 (SIGSEGV)", true},
        CrashCase{"Abort", "killed by signal 6 (SIGABRT)", true}, CrashCase{"Exit", "exited with status 3", false},
        CrashCase{"OomKill", "killed by signal 9 (SIGKILL), as the OOM killer", false},
        CrashCase{"Leak", "killed by signal 6 (SIGABRT)", true}, CrashCase{"CloseFds", "exited with status 70", false},
        CrashCase{"Hang", "/v1.Crasher/Hang was still running 1 s after its deadline", false},
        // Declared NONBLOCKING: the host's thread that sent the call waits for the answer itself.
        CrashCase{"SegfaultInline", "killed by signal 11 (SIGSEGV)", true},
        CrashCase{"HangInline", "/v1.Crasher/HangInline was still running 1 s after its deadline", false}),
    [](const ::testing::TestParamInfo<CrashCase>& info) { return std::string(info.param.method); });

TEST(Isolation, CallsInFlightOfTheCrashedRunnerFailAndNoOthers) {
  HostOptions options;
  options.launcher = {"/usr/bin/prlimit", "--core=0", "--"};
  HostProcess host(CrasherGroup() + "[groups.echo]\nisolation = \"process\"\n", "", options);
  ASSERT_TRUE(host.Start({kCrasher, kEcho})) << host.error();
  auto crasher = Dial(host.endpoint(kCrasher));
  const pid_t first = CrasherPid(crasher);
  // Calls hanging in the crasher's runner when it crashes are answered at once, not at their deadline.
  std::vector<std::future<grpc::Status>> hanging;
  for (int i = 0; i < 3; ++i) {
    hanging.push_back(std::async(std::launch::async, [&] {
      v1::EchoResponse resp;
      return Call(crasher, "/v1.Crasher/Hang", Req(), &resp, milliseconds(30000));
    }));
  }
  ClientLoop others(host.endpoint(kEcho));
  std::this_thread::sleep_for(milliseconds(300));
  auto begin = Clock::now();
  v1::EchoResponse resp;
  EXPECT_FALSE(Call(crasher, "/v1.Crasher/Abort", Req(), &resp).ok());
  for (auto& h : hanging) {
    grpc::Status s = h.get();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
    EXPECT_NE(s.error_message().find("SIGABRT"), std::string::npos) << s.error_message();
  }
  EXPECT_LT(Clock::now() - begin, milliseconds(10000));
  EXPECT_GT(WaitForNewRunner(crasher, first, milliseconds(10000)), 0) << host.log();
  others.Stop();
  EXPECT_EQ(others.failures(), 0) << others.last_failure();
  EXPECT_GT(others.calls(), 0);
}

// A method that may block runs in the runner where the host would run it in process: once it has run quickly a few
// times, on the thread that read it (the borrowed thread) rather than handed to a worker; and when it hangs there,
// the runner's other reading thread goes on serving the group's calls.
TEST(Isolation, AQuickMethodThatMayBlockRunsOnTheReadingThreadAndAHangThereHoldsNoOtherCall) {
  HostOptions options;
  options.launcher = {"/usr/bin/prlimit", "--core=0", "--"};
  HostProcess host(CrasherGroup("hang_restart_seconds = 1\n"), "", options);
  ASSERT_TRUE(host.Start({kCrasher})) << host.error();
  auto crasher = Dial(host.endpoint(kCrasher));
  const pid_t runner = CrasherPid(crasher);
  ASSERT_GT(runner, 0);
  std::set<pid_t> threads;
  // Eight quick runs in a row make a method borrow (a slow one, on a loaded machine, starts the count again).
  for (int i = 0; i < 40; ++i) {
    v1::EchoResponse resp;
    ASSERT_TRUE(Call(crasher, "/v1.Crasher/Tid", Req(), &resp, milliseconds(5000)).ok());
    threads.insert(static_cast<pid_t>(std::stol(resp.text())));
  }
  // The runner's main thread reads first; a worker's thread id is never the process's.
  EXPECT_TRUE(threads.contains(runner)) << "the quick calls all ran on workers";

  auto hung = std::async(std::launch::async, [&] {
    v1::EchoResponse resp;
    return Call(crasher, "/v1.Crasher/Tid", Req("hang"), &resp, milliseconds(3000));
  });
  std::this_thread::sleep_for(milliseconds(300));
  const auto begin = Clock::now();
  for (int i = 0; i < 5; ++i) {
    v1::EchoResponse resp;
    grpc::Status s = Call(crasher, "/v1.Crasher/Tid", Req(), &resp, milliseconds(2000));
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
  EXPECT_EQ(CrasherPid(crasher), runner);
  EXPECT_LT(Clock::now() - begin, milliseconds(2000)) << "the hung handler held the other calls back";
  EXPECT_EQ(hung.get().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(host.Stop(), 0) << host.log();
}

// The CPU time every thread of `pid` has used so far (the kernel's schedstat), in microseconds; threads that
// ended are not counted.
double CpuMicros(pid_t pid) {
  int64_t ns = 0;
  std::error_code ec;
  for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream schedstat(task.path() / "schedstat");
    int64_t used = 0;
    if (schedstat >> used) ns += used;
  }
  return static_cast<double>(ns) / 1e3;
}

// The host thread that waits for an isolated NONBLOCKING call's answer spins a short while before it sleeps, so
// that an answer that comes at once costs no wake-up; a handler that takes long costs it at most that bound (and,
// once such answers keep coming late, no spin at all). Told by the host's CPU time per call, not by a call's
// wall-clock time: a slow answer must cost the host no more CPU than a quick one, give or take the bound.
TEST(Isolation, AnAnswerThatTakesLongCostsTheHostThreadWaitingForItAtMostTheSpinsBound) {
  HostProcess host(CrasherGroup(), "");
  ASSERT_TRUE(host.Start({kCrasher})) << host.error();
  auto crasher = Dial(host.endpoint(kCrasher));
  // The host's CPU time per call of SlowInline answering after `micros`, one call at a time.
  auto host_cpu_per_call = [&](const std::string& micros) {
    constexpr int kCalls = 300;
    const double before = CpuMicros(host.pid());
    for (int i = 0; i < kCalls; ++i) {
      v1::EchoResponse resp;
      grpc::Status s = Call(crasher, "/v1.Crasher/SlowInline", Req(micros), &resp, milliseconds(5000));
      EXPECT_TRUE(s.ok()) << s.error_message();
    }
    return (CpuMicros(host.pid()) - before) / kCalls;
  };
  host_cpu_per_call("0");  // warm-up
  const double quick = host_cpu_per_call("0");
  const double slow = host_cpu_per_call("700");  // under the 1 ms the thread waits, far over the spin's bound
  EXPECT_LT(slow - quick, 150) << "host CPU per call: " << quick << " us answering at once, " << slow
                               << " us answering after 700 us";
  EXPECT_EQ(host.Stop(), 0) << host.log();
}

// The runner's reader spins a short while for the next call after answering a NONBLOCKING one, so that a call that
// comes at once costs the host no wake-up of the runner; calls that come seldom cost it no spin once recent spins
// found nothing. Told by the runner's CPU time per call, 2 ms apart, against that of a method that may block (after
// which the reader never spins): without the gate, each NONBLOCKING call would cost the whole 150 µs bound more.
TEST(Isolation, CallsThatComeSeldomCostTheRunnerNoSpin) {
  HostProcess host(CrasherGroup(), "");
  ASSERT_TRUE(host.Start({kCrasher})) << host.error();
  auto crasher = Dial(host.endpoint(kCrasher));
  const pid_t runner = CrasherPid(crasher);
  ASSERT_GT(runner, 0);
  auto runner_cpu_per_call = [&](const std::string& method) {
    constexpr int kCalls = 200;
    const double before = CpuMicros(runner);
    for (int i = 0; i < kCalls; ++i) {
      v1::EchoResponse resp;
      grpc::Status s = Call(crasher, method, Req("0"), &resp, milliseconds(5000));
      EXPECT_TRUE(s.ok()) << s.error_message();
      std::this_thread::sleep_for(milliseconds(2));
    }
    return (CpuMicros(runner) - before) / kCalls;
  };
  runner_cpu_per_call("/v1.Crasher/SlowInline");  // warm-up
  const double inline_call = runner_cpu_per_call("/v1.Crasher/SlowInline");
  const double may_block = runner_cpu_per_call("/v1.Crasher/Tid");
  EXPECT_LT(inline_call - may_block, 30) << "runner CPU per call, 2 ms apart: " << inline_call << " us NONBLOCKING, "
                                         << may_block << " us for a method that may block";
  EXPECT_EQ(CrasherPid(crasher), runner);
  EXPECT_EQ(host.Stop(), 0) << host.log();
}

TEST(Isolation, AGroupThatKeepsCrashingIsMarkedFailedUntilAReload) {
  HostOptions options;
  options.launcher = {"/usr/bin/prlimit", "--core=0", "--"};
  HostProcess host(CrasherGroup("restart_limit = 1\nrestart_window_seconds = 600\n") + "[groups.echo]\n", "", options);
  ASSERT_TRUE(host.Start({kCrasher, kEcho})) << host.error();
  auto crasher = Dial(host.endpoint(kCrasher));
  v1::EchoResponse resp;
  pid_t pid = CrasherPid(crasher);
  EXPECT_FALSE(Call(crasher, "/v1.Crasher/Abort", Req(), &resp).ok());
  pid = WaitForNewRunner(crasher, pid, milliseconds(10000));
  ASSERT_GT(pid, 0) << host.log();
  EXPECT_EQ(HealthOf(host.endpoint(kCrasher)), "SERVING");
  EXPECT_FALSE(Call(crasher, "/v1.Crasher/Abort", Req(), &resp).ok());  // the second end within the window

  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (StatusOf(host, "crasher").state() != "failed" && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  admin::v1::GroupStatus status = StatusOf(host, "crasher");
  EXPECT_EQ(status.state(), "failed");
  EXPECT_EQ(status.runner_pid(), 0);
  EXPECT_EQ(HealthOf(host.endpoint(kCrasher)), "NOT_SERVING");
  EXPECT_EQ(HealthOf(host.endpoint(kEcho)), "SERVING");
  auto refused = Call(crasher, "/v1.Crasher/Pid", Req(), &resp);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(refused.error_message().find("group 'crasher' failed"), std::string::npos) << refused.error_message();
  EXPECT_TRUE(ChildrenOf(host.pid()).empty()) << "no runner, no zombie";

  ASSERT_TRUE(host.Reload()) << host.log();
  EXPECT_GT(WaitForNewRunner(crasher, pid, milliseconds(10000)), 0) << host.log();
  EXPECT_EQ(HealthOf(host.endpoint(kCrasher)), "SERVING");
  EXPECT_EQ(StatusOf(host, "crasher").state(), "serving");
}

// The runner confines itself before the library loads (isolation/privileges.h): a third party's group gets no
// capability by default, and the filter refuses what no group needs, whatever the capabilities. In the host's
// process the same library holds everything the host holds.
TEST(Isolation, AnIsolatedGroupsAttemptBeyondItsPrivilegesFailsWithEperm) {
  HostProcess host(CrasherGroup() + "[groups.echo]\n");
  ASSERT_TRUE(host.Start({kCrasher, kEcho})) << host.error();
  v1::EchoResponse resp;
  auto s = Call(Dial(host.endpoint(kCrasher)), "/v1.Crasher/Privileged", Req(), &resp);
  ASSERT_TRUE(s.ok()) << s.error_message() << host.log();
  EXPECT_EQ(resp.text(), "raw_socket=EPERM;reboot=EPERM;CapEff=0000000000000000");
  EXPECT_NE(StatusOf(host, "crasher").privileges().find("capabilities: none"), std::string::npos)
      << StatusOf(host, "crasher").privileges();

  HostProcess with_raw(CrasherGroup("capabilities = [\"CAP_NET_RAW\", \"CAP_SYS_BOOT\"]\n") + "[groups.echo]\n");
  ASSERT_TRUE(with_raw.Start({kCrasher, kEcho})) << with_raw.error();
  s = Call(Dial(with_raw.endpoint(kCrasher)), "/v1.Crasher/Privileged", Req(), &resp);
  ASSERT_TRUE(s.ok()) << s.error_message() << with_raw.log();
  // CAP_SYS_BOOT is held, and the filter still refuses reboot.
  EXPECT_EQ(resp.text(), "raw_socket=ok;reboot=EPERM;CapEff=0000000000402000");
}

// A library that stops the programs it ran by signalling its process group (kill(0, ...)) reaches only its own
// runner and the runner's children: the runner leads a process group of its own, never the host's.
TEST(Isolation, ALibraryThatSignalsItsProcessGroupEndsOnlyItsRunner) {
  HostProcess host(CrasherGroup() + "[groups.echo]\n");
  ASSERT_TRUE(host.Start({kCrasher, kEcho})) << host.error();
  auto crasher = Dial(host.endpoint(kCrasher));
  const pid_t first = CrasherPid(crasher);
  ASSERT_GT(first, 0);
  ClientLoop others(host.endpoint(kEcho));
  v1::EchoResponse resp;
  auto killed = Call(crasher, "/v1.Crasher/KillGroup", Req(), &resp, milliseconds(15000));
  EXPECT_EQ(killed.error_code(), grpc::StatusCode::UNAVAILABLE) << killed.error_message();
  EXPECT_NE(killed.error_message().find("group 'crasher'"), std::string::npos) << killed.error_message();
  EXPECT_NE(killed.error_message().find("killed by signal 15 (SIGTERM)"), std::string::npos) << killed.error_message();
  EXPECT_GT(WaitForNewRunner(crasher, first, milliseconds(10000)), 0) << host.log();
  std::this_thread::sleep_for(milliseconds(200));
  others.Stop();
  EXPECT_GT(others.calls(), 0);
  EXPECT_EQ(others.failures(), 0) << others.last_failure();
  ASSERT_TRUE(host.running()) << host.log();
  EXPECT_EQ(host.log().find("received SIGTERM"), std::string::npos) << host.log();
  EXPECT_EQ(host.Stop(), 0) << host.log();
}

// A runner runs as root unless `user` says otherwise, and root may signal every root process without CAP_KILL: the
// filter refuses its signals to the host, to the host's process group and to every process at once, and leaves its
// own group, its children and their groups alone (isolation/privileges.h). Signal 0 sends nothing.
TEST(Isolation, AnIsolatedGroupCannotSignalTheHostItsGroupNorEveryone) {
  HostProcess host(CrasherGroup());
  ASSERT_TRUE(host.Start({kCrasher})) << host.error();
  v1::EchoResponse resp;
  auto s = Call(Dial(host.endpoint(kCrasher)), "/v1.Crasher/Signals", Req(), &resp);
  ASSERT_TRUE(s.ok()) << s.error_message() << host.log();
  EXPECT_EQ(resp.text(),
            "kill_parent=EPERM;kill_parent_high_bits=EPERM;kill_everyone=EPERM;kill_parents_group=EPERM;"
            "tgkill_parent=EPERM;rt_sigqueueinfo_parent=EPERM;pidfd_open_parent=EPERM;tkill_self=EPERM;"
            "kill_own_group=ok;killpg_own_group=ok;kill_self=ok;kill_childs_group=ok");
  EXPECT_EQ(host.Stop(), 0) << host.log();
}

// Protobuf's encoding of a message whose field 1 is the string `value` (the filesystem and system groups' requests
// used here have that one field).
std::string StringField1(const std::string& value) {
  return std::string(1, '\x0a') + static_cast<char>(value.size()) + value;
}

struct Answer {
  int code;
  std::string message;
  std::string response;
  bool operator==(const Answer& o) const { return code == o.code && message == o.message && response == o.response; }
};
std::ostream& operator<<(std::ostream& out, const Answer& a) {
  return out << "{" << a.code << ", '" << a.message << "', " << a.response.size() << " bytes}";
}

Answer Ask(HostProcess& host, const std::string& endpoint, const std::string& method, const std::string& request) {
  std::string response;
  auto s = CallRaw(Dial(host.endpoint(endpoint)), method, request, &response, milliseconds(10000));
  std::string message = s.error_message();
  // Each host has a kubelet directory of its own: the messages are compared without it.
  for (size_t at; (at = message.find(host.kubelet_dir())) != std::string::npos;) {
    message.replace(at, host.kubelet_dir().size(), "<kubelet>");
  }
  return {s.error_code(), message, response};
}

TEST(Isolation, TheShippedGroupsAndTheExampleAnswerTheSameIsolatedAsInProcess) {
  const std::vector<std::string> endpoints = {kEcho, "csi-proxy-filesystem-v1", "csi-proxy-system-v1alpha1"};
  HostProcess in_process("[groups.echo]\n[groups.filesystem]\n[groups.system]\n");
  HostProcess isolated(
      "[groups.echo]\nisolation = \"process\"\n[groups.filesystem]\nisolation = \"process\"\n"
      "[groups.system]\nisolation = \"process\"\n");
  ASSERT_TRUE(in_process.Start(endpoints)) << in_process.error();
  ASSERT_TRUE(isolated.Start(endpoints)) << isolated.error();
  for (HostProcess* host : {&in_process, &isolated}) fs::create_directories(host->kubelet_dir() + "/present");
  for (const char* group : {"echo", "filesystem", "system"}) {
    admin::v1::GroupStatus status = StatusOf(isolated, group);
    EXPECT_EQ(status.isolation(), "process") << group;
    EXPECT_GT(status.runner_pid(), 0) << group;
    EXPECT_NE(status.runner_pid(), isolated.pid()) << group;
    EXPECT_EQ(StatusOf(in_process, group).isolation(), "in-process") << group;
  }

  v1::EchoRequest failing = Req("refused on purpose");
  failing.set_fail_with_code(5);
  v1::EchoRequest throwing = Req();
  throwing.set_throw_exception(true);
  v1::EchoRequest later = Req("later");
  later.set_delay_ms(20);
  struct Case {
    std::string endpoint, method;
    std::function<std::string(HostProcess&)> request;
  };
  auto fixed = [](std::string bytes) { return [bytes](HostProcess&) { return bytes; }; };
  auto under_kubelet = [](std::string rest) {
    return [rest](HostProcess& host) { return StringField1(host.kubelet_dir() + rest); };
  };
  const std::vector<Case> cases = {
      {kEcho, "/v1.Echo/Echo", fixed(Req("hello").SerializeAsString())},
      {kEcho, "/v1.Echo/Echo", fixed(failing.SerializeAsString())},
      {kEcho, "/v1.Echo/Echo", fixed(throwing.SerializeAsString())},
      {kEcho, "/v1.Echo/EchoLater", fixed(later.SerializeAsString())},
      {kEcho, "/v1.Echo/NoSuchMethod", fixed("")},
      {"csi-proxy-filesystem-v1", "/v1.Filesystem/PathExists", under_kubelet("/present")},
      {"csi-proxy-filesystem-v1", "/v1.Filesystem/PathExists", under_kubelet("/absent")},
      {"csi-proxy-filesystem-v1", "/v1.Filesystem/PathExists", fixed(StringField1("/etc/passwd"))},
      {"csi-proxy-filesystem-v1", "/v1.Filesystem/Mkdir", under_kubelet("/made/here")},
      {"csi-proxy-filesystem-v1", "/v1.Filesystem/PathExists", under_kubelet("/made/here")},
      {"csi-proxy-filesystem-v1", "/v1.Filesystem/PathExists", fixed("\xff\xff")},  // not a message
      {"csi-proxy-system-v1alpha1", "/v1alpha1.System/GetBIOSSerialNumber", fixed("")},
      {"csi-proxy-system-v1alpha1", "/v1alpha1.System/GetService", fixed(StringField1("ssh"))},
      {"csi-proxy-system-v1alpha1", "/v1alpha1.System/GetService", fixed(StringField1("no such/service"))},
  };
  for (const auto& c : cases) {
    Answer expected = Ask(in_process, c.endpoint, c.method, c.request(in_process));
    EXPECT_EQ(Ask(isolated, c.endpoint, c.method, c.request(isolated)), expected) << c.method;
  }
  EXPECT_TRUE(fs::is_directory(isolated.kubelet_dir() + "/made/here"));  // the runner did the work

  // The caller's identity reaches the library through the runner as it does in process.
  v1::WhoAmIResponse who_in, who_isolated;
  ASSERT_TRUE(Call(Dial(in_process.endpoint(kEcho)), "/v1.Echo/WhoAmI", v1::WhoAmIRequest(), &who_in).ok());
  ASSERT_TRUE(Call(Dial(isolated.endpoint(kEcho)), "/v1.Echo/WhoAmI", v1::WhoAmIRequest(), &who_isolated).ok());
  EXPECT_EQ(who_isolated.pid(), getpid());
  EXPECT_EQ(who_isolated.uid(), who_in.uid());
  EXPECT_EQ(who_isolated.gid(), who_in.gid());
  EXPECT_EQ(who_isolated.greeting(), who_in.greeting());
  EXPECT_GT(who_isolated.deadline_unix_ns(), 0);

  // Reflection's source, as the admin socket describes each endpoint, is the same.
  for (const auto& endpoint : endpoints) {
    admin::v1::DescriptorsRequest request;
    request.set_endpoint(endpoint);
    admin::v1::DescriptorsResponse a, b;
    grpc::ClientContext ca, cb;
    ASSERT_TRUE(admin::v1::Admin::NewStub(Dial(in_process.admin_socket()))->Descriptors(&ca, request, &a).ok());
    ASSERT_TRUE(admin::v1::Admin::NewStub(Dial(isolated.admin_socket()))->Descriptors(&cb, request, &b).ok());
    EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString()) << endpoint;
    EXPECT_GT(b.file_descriptors_size(), 0) << endpoint;
  }
}

std::string IsolatedBlocker(const std::string& tag) {
  return "[groups.blocker]\nlibrary = \"" + BuildDir() + "/tests/fixtures/libcsi-proxy-blocker1.so\"\n" +
         "isolation = \"process\"\ntag = \"" + tag + "\"\n";
}

// A call of `method` left running until the client cancels it or it is answered.
class PendingCall {
 public:
  PendingCall(const std::shared_ptr<grpc::Channel>& channel, const std::string& method, const std::string& request)
      : stub_(channel) {
    grpc::Slice slice(request);
    grpc::ByteBuffer buffer(&slice, 1);
    call_ = stub_.PrepareUnaryCall(&ctx_, method, buffer, &cq_);
    call_->StartCall();
    call_->Finish(&response_, &status_, this);
  }
  ~PendingCall() {
    Cancel();
    Wait();
    cq_.Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (cq_.Next(&tag, &ok)) {
    }
  }
  void Cancel() { ctx_.TryCancel(); }
  grpc::Status Wait() {
    if (!done_) {
      void* tag = nullptr;
      bool ok = false;
      cq_.Next(&tag, &ok);
      done_ = true;
    }
    return status_;
  }

 private:
  grpc::GenericStub stub_;
  grpc::CompletionQueue cq_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> call_;
  grpc::ByteBuffer response_;
  grpc::Status status_;
  bool done_ = false;
};

// The group's status once `wanted` holds for it, or the last one seen when it did not within `bound`.
admin::v1::GroupStatus AwaitStatus(HostProcess& host, const std::string& group,
                                   const std::function<bool(const admin::v1::GroupStatus&)>& wanted,
                                   milliseconds bound = milliseconds(5000)) {
  auto admin = admin::v1::Admin::NewStub(Dial(host.admin_socket()));
  admin::v1::GroupStatus last;
  for (auto deadline = Clock::now() + bound; Clock::now() < deadline;) {
    grpc::ClientContext ctx;
    admin::v1::StatusResponse status;
    if (admin->Status(&ctx, admin::v1::StatusRequest(), &status).ok()) {
      for (const auto& g : status.groups()) {
        if (g.name() == group) last = g;
      }
      if (wanted(last)) return last;
    }
    std::this_thread::sleep_for(milliseconds(2));
  }
  return last;
}

// The runner runs an isolated group's calls within the group's budget; the host's status and metrics show that
// budget as they do a group's in process: the calls running and waiting in the runner, and those it refused, also
// once the runner that refused them has ended.
TEST(Isolation, TheStatusAndTheMetricsCountTheCallsRunningQueuedAndRefusedInTheRunner) {
  const uint16_t port = test_support::FreeLoopbackPort();
  HostOptions options;
  options.launcher = {"/usr/bin/prlimit", "--core=0", "--"};
  HostProcess host(IsolatedBlocker("a") + "workers = 1\nmax_queued_calls = 1\n",
                   "metrics_address = \"127.0.0.1:" + std::to_string(port) + "\"\n", options);
  ASSERT_TRUE(host.Start({"csi-proxy-blocker-v1"})) << host.error();
  auto channel = Dial(host.endpoint("csi-proxy-blocker-v1"));
  admin::v1::GroupStatus status = StatusOf(host, "blocker");
  EXPECT_EQ(status.running(), 0);
  EXPECT_EQ(status.queued(), 0);

  PendingCall first(channel, "/v1.Blocker/Block", Req().SerializeAsString());
  status = AwaitStatus(host, "blocker", [](const auto& g) { return g.running() == 1; });
  EXPECT_EQ(status.running(), 1);
  EXPECT_EQ(status.queued(), 0);
  EXPECT_EQ(status.in_flight(), 1);

  PendingCall second(channel, "/v1.Blocker/Block", Req().SerializeAsString());
  status = AwaitStatus(host, "blocker", [](const auto& g) { return g.queued() == 1; });
  EXPECT_EQ(status.running(), 1);
  EXPECT_EQ(status.queued(), 1);
  EXPECT_EQ(status.in_flight(), 2);
  std::string metrics = Scrape(port);
  EXPECT_EQ(Value(metrics, "csi_proxy_group_workers_busy", {{"group", "blocker"}}), 1) << metrics;
  EXPECT_EQ(Value(metrics, "csi_proxy_group_calls_queued", {{"group", "blocker"}}), 1) << metrics;
  EXPECT_EQ(Value(metrics, "csi_proxy_group_calls_in_flight", {{"group", "blocker"}}), 2) << metrics;

  // A third finds the budget and the queue full: the runner refuses it. The runner then ends (killed, as the OOM
  // killer would) before anyone asked how many it refused: the host counted the refusal all the same.
  const pid_t runner = status.runner_pid();
  v1::EchoResponse resp;
  grpc::Status refused = Call(channel, "/v1.Blocker/Block", Req("at-once"), &resp, milliseconds(5000));
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_NE(refused.error_message().find("'blocker'"), std::string::npos) << refused.error_message();
  ASSERT_EQ(kill(runner, SIGKILL), 0);
  EXPECT_EQ(first.Wait().error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(second.Wait().error_code(), grpc::StatusCode::UNAVAILABLE);
  status = AwaitStatus(
      host, "blocker", [&](const auto& g) { return g.runner_pid() != 0 && g.runner_pid() != runner; },
      milliseconds(10000));
  EXPECT_EQ(status.restarts(), 1u) << host.log();
  EXPECT_EQ(status.running(), 0);
  EXPECT_EQ(status.queued(), 0);
  EXPECT_EQ(status.in_flight(), 0);
  EXPECT_EQ(status.refused(), 1u);
  metrics = Scrape(port);
  EXPECT_EQ(Value(metrics, "csi_proxy_group_refused_total", {{"group", "blocker"}}), 1) << metrics;
  // The refusal is logged once, by the host, as a call that fails in process is (not again from the runner).
  const std::string line = "[blocker] /v1.Blocker/Block failed with RESOURCE_EXHAUSTED";
  const std::string log = host.log();
  ASSERT_NE(log.find(line), std::string::npos) << log;
  EXPECT_EQ(log.find(line, log.find(line) + 1), std::string::npos) << log;
}

// A handler in the runner sees its call cancelled as soon as one in process would: the host tells the runner when
// the client cancels, not at a later sweep. The blocker's handler looks every 10 ms and returns once it sees the
// cancellation; its answer is what ends the call in the host's count of calls in flight.
TEST(Isolation, AClientsCancellationReachesTheHandlerInTheRunnerAtOnce) {
  HostProcess host(IsolatedBlocker("a"));
  ASSERT_TRUE(host.Start({"csi-proxy-blocker-v1"})) << host.error();
  auto channel = Dial(host.endpoint("csi-proxy-blocker-v1"));
  std::vector<int64_t> took_ms;
  for (int round = 0; round < 8; ++round) {
    PendingCall call(channel, "/v1.Blocker/Block", Req().SerializeAsString());
    ASSERT_EQ(AwaitStatus(host, "blocker", [](const auto& g) { return g.running() == 1; }).running(), 1);
    const auto cancelled = Clock::now();
    call.Cancel();
    EXPECT_EQ(call.Wait().error_code(), grpc::StatusCode::CANCELLED);
    // Without word from the host the handler would block for its 60 s.
    ASSERT_EQ(AwaitStatus(host, "blocker", [](const auto& g) { return g.in_flight() == 0; }).in_flight(), 0)
        << host.log();
    took_ms.push_back(std::chrono::duration_cast<milliseconds>(Clock::now() - cancelled).count());
  }
  // Told at once, the handler answers within its 10 ms look and a hop; a sweep every 200 ms would leave most of
  // the rounds above 50 ms. One round in four may be slow on a loaded machine.
  const auto quick = std::count_if(took_ms.begin(), took_ms.end(), [](int64_t ms) { return ms < 50; });
  std::string all;
  for (int64_t ms : took_ms) all += std::to_string(ms) + " ms ";
  EXPECT_GE(quick, 6) << all;
}

// log_level applies at a reload without a restart; an isolated group's runner follows it (its library's debug lines
// reach the log from then on), as a library in the host's process does.
TEST(Isolation, TheRunnersLogFollowsTheLogLevelAReloadSets) {
  HostOptions options;
  options.launcher = {"/usr/bin/prlimit", "--core=0", "--"};
  HostProcess host(CrasherGroup(), "log_level = \"info\"\n", options);
  ASSERT_TRUE(host.Start({kCrasher})) << host.error();
  auto crasher = Dial(host.endpoint(kCrasher));
  const pid_t runner = CrasherPid(crasher);
  v1::EchoResponse resp;
  ASSERT_TRUE(Call(crasher, "/v1.Crasher/LogDebug", Req("before the reload"), &resp).ok());
  host.WriteConfig(CrasherGroup(), "log_level = \"debug\"\n");
  ASSERT_TRUE(host.Reload()) << host.log();
  EXPECT_EQ(CrasherPid(crasher), runner);  // the same runner: nothing of the group changed
  ASSERT_TRUE(Call(crasher, "/v1.Crasher/LogDebug", Req("after the reload"), &resp).ok());
  // A runner started later (after a crash) starts at the new level.
  EXPECT_FALSE(Call(crasher, "/v1.Crasher/Abort", Req(), &resp).ok());
  ASSERT_GT(WaitForNewRunner(crasher, runner, milliseconds(10000)), 0) << host.log();
  ASSERT_TRUE(Call(crasher, "/v1.Crasher/LogDebug", Req("in the next runner"), &resp).ok());
  EXPECT_EQ(host.Stop(), 0);
  const std::string log = host.log();
  EXPECT_EQ(log.find("[crasher] before the reload"), std::string::npos) << log;
  EXPECT_NE(log.find("[crasher] after the reload"), std::string::npos) << log;
  EXPECT_NE(log.find("[crasher] in the next runner"), std::string::npos) << log;
}

// The lines of `log` that mention `what`, without their time.
std::vector<std::string> LinesWith(const std::string& log, const std::string& what) {
  std::vector<std::string> out;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(what) == std::string::npos) continue;
    const size_t level = line.find(" error ");
    out.push_back(level == std::string::npos ? line : line.substr(level));
  }
  return out;
}

// A library its runner refuses (its init fails) is logged as in process: once, by the host, with the library's
// own words; the runner's log adds nothing to it.
TEST(Isolation, ALibraryItsRunnerRefusesIsLoggedOnceAsInProcess) {
  std::vector<std::string> seen[2];
  for (int isolated = 0; isolated < 2; ++isolated) {
    HostProcess host("[groups.initfails]\nlibrary = \"" + BuildDir() + "/tests/fixtures/libcsi-proxy-initfails.so\"\n" +
                     (isolated ? "isolation = \"process\"\n" : "") + "[groups.echo]\n");
    EXPECT_EQ(host.RunToExit({"--check-config"}), 0) << host.log();
    seen[isolated] = LinesWith(host.log(), "the widget driver is not loaded");
  }
  EXPECT_EQ(seen[1], seen[0]);
  EXPECT_EQ(std::count_if(seen[1].begin(), seen[1].end(),
                          [](const std::string& line) { return line.rfind(" error ", 0) == 0; }),
            1);
}

TEST(Isolation, AnUpgradeStartsTheNewRunnerBeforeTheOldOneDrains) {
  const std::string kBlocker = "csi-proxy-blocker-v1";
  HostProcess host(IsolatedBlocker("a"), "shutdown_timeout_seconds = 20\n");
  ASSERT_TRUE(host.Start({kBlocker})) << host.error();
  auto channel = Dial(host.endpoint(kBlocker));
  const std::vector<pid_t> old_runner = ChildrenOf(host.pid());
  ASSERT_EQ(old_runner.size(), 1u);
  auto blocked = std::async(std::launch::async, [&] {
    v1::EchoRequest req = Req();
    req.set_delay_ms(3000);
    v1::EchoResponse resp;
    grpc::Status s = Call(channel, "/v1.Blocker/Block", req, &resp, milliseconds(20000));
    return s.ok() ? resp.text() : "error: " + s.error_message();
  });
  std::this_thread::sleep_for(milliseconds(300));  // the call runs in the old runner
  host.WriteConfig(IsolatedBlocker("b"), "shutdown_timeout_seconds = 20\n");
  auto reloaded = std::async(std::launch::async, [&] { return host.Reload(); });

  auto deadline = Clock::now() + std::chrono::seconds(10);
  std::string tag;
  while (Clock::now() < deadline) {
    v1::EchoResponse resp;
    if (Call(channel, "/v1.Blocker/Tag", Req(), &resp, milliseconds(1000)).ok()) tag = resp.text();
    if (tag == "1.0.0:b") break;
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_EQ(tag, "1.0.0:b");                                                  // the new runner serves...
  EXPECT_EQ(blocked.wait_for(milliseconds(0)), std::future_status::timeout);  // ...while the old one drains
  EXPECT_EQ(ChildrenOf(host.pid()).size(), 2u);
  EXPECT_EQ(blocked.get(), "a");
  ASSERT_TRUE(reloaded.get()) << host.log();
  std::vector<pid_t> now = ChildrenOf(host.pid());
  ASSERT_EQ(now.size(), 1u);
  EXPECT_NE(now[0], old_runner[0]);
  EXPECT_TRUE(Gone(old_runner[0]));
}

// systemd stops a service by sending SIGTERM to each of its processes (its cgroup's, the runners' included): the
// runners leave their stop to the host, which drains their calls first.
TEST(Isolation, ARunnerLeavesAServiceWideStopSignalToTheHost) {
  HostProcess host(CrasherGroup());
  ASSERT_TRUE(host.Start({kCrasher})) << host.error();
  auto crasher = Dial(host.endpoint(kCrasher));
  const pid_t runner = CrasherPid(crasher);
  ASSERT_GT(runner, 0);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) ASSERT_EQ(kill(runner, sig), 0);
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(CrasherPid(crasher), runner);
  EXPECT_EQ(StatusOf(host, "crasher").restarts(), 0u);
  EXPECT_EQ(host.Stop(), 0) << host.log();
  EXPECT_TRUE(Gone(runner));
}

TEST(Isolation, AnIsolationValueThatIsNotKnownIsRefusedWithItsLine) {
  HostProcess host("[groups.echo]\nisolation = \"container\"\n");
  EXPECT_EQ(host.RunToExit({"--check-config"}), 1) << host.log();
  EXPECT_NE(host.log().find("csi-proxy.toml:9: groups.echo.isolation holds 'container'; it must be \"in-process\" or "
                            "\"process\""),
            std::string::npos)
      << host.log();
}

// Waits (bounded) until the host's log holds `what`; the log.
std::string AwaitLog(HostProcess& host, const std::string& what, milliseconds bound = milliseconds(10000)) {
  for (auto deadline = Clock::now() + bound; Clock::now() < deadline; std::this_thread::sleep_for(milliseconds(20))) {
    if (host.log().find(what) != std::string::npos) break;
  }
  return host.log();
}

// Everything a runner sends is the word of the group's library, which may be hostile: its log lines are written in
// the host's words (the group named by the host, control characters escaped, a line's length and a second's lines
// bounded), answers with a code gRPC does not have or to calls not in flight change nothing else, and a Usage's
// counts and its answer to a question never asked are not believed.
TEST(Isolation, WhatARunnerSendsIsTheGroupsWordNotTheHosts) {
  HostProcess host(CrasherGroup() + "[groups.echo]\n");
  ASSERT_TRUE(host.Start({kCrasher, kEcho})) << host.error();
  auto crasher = Dial(host.endpoint(kCrasher));
  const pid_t runner = CrasherPid(crasher);
  ASSERT_GT(runner, 0);
  v1::EchoResponse resp;
  auto forged = Call(crasher, "/v1.Crasher/Forge", Req(), &resp, milliseconds(10000));
  EXPECT_EQ(forged.error_code(), grpc::StatusCode::UNKNOWN) << forged.error_message();  // code 99
  EXPECT_EQ(forged.error_message(), "forged answer");
  const std::string log = AwaitLog(host, "after the flood");

  auto only = [](const std::vector<std::string>& lines) { return lines.size() == 1 ? lines[0] : std::string(); };
  const std::string forged_line = only(LinesWith(log, "a forged line"));
  EXPECT_EQ(forged_line,
            " error [crasher] forged\\n2026-01-01T00:00:00.000+00:00 error [echo] a forged line\\x1b[2J\\x9b")
      << log;
  EXPECT_EQ(log.find("\n2026-01-01T00:00:00"), std::string::npos) << "a line of the runner's own making";
  EXPECT_EQ(log.find('\x1b'), std::string::npos);
  EXPECT_NE(log.find("[crasher] [echo] posing"), std::string::npos) << log;  // the well-behaved prefix once only
  const std::string long_line = only(LinesWith(log, "long xxx"));
  EXPECT_LT(long_line.size(), 2200u);
  EXPECT_NE(long_line.find("... (100005 bytes)"), std::string::npos) << long_line.substr(0, 100);
  // 200 lines a second: the flood's 1000 came at once, so one second's worth, or two when a second ended amid it.
  const size_t flood = LinesWith(log, "[crasher] flood ").size();
  EXPECT_GE(flood, 100u);
  EXPECT_LE(flood, 400u);
  const std::string after = only(LinesWith(log, "after the flood"));
  EXPECT_NE(after.find("lines of the runner before this one were not logged: more than 200 a second"),
            std::string::npos)
      << after;

  // The Usage's negative counts and its queued 12345 answered a question never asked: the status asks the runner
  // and shows what it answers (the Forge handler may be returning still).
  admin::v1::GroupStatus status = StatusOf(host, "crasher");
  EXPECT_GE(status.running(), 0);
  EXPECT_LE(status.running(), 1);
  EXPECT_EQ(status.queued(), 0);
  EXPECT_EQ(CrasherPid(crasher), runner) << "the runner serves on";
  auto echo = Call(Dial(host.endpoint(kEcho)), "/v1.Echo/Echo", Req("ping"), &resp);
  EXPECT_TRUE(echo.ok()) << echo.error_message();

  // What its crash says it ran is its word too.
  EXPECT_FALSE(Call(crasher, "/v1.Crasher/Forge", Req("crash"), &resp, milliseconds(10000)).ok());
  const std::string line =
      "exited with status 9 while its library ran /v1.Crasher/Forge\\n2026-01-01T00:00:00.000+00:00 info  [echo] "
      "forged; restarting it";
  const std::string ended = AwaitLog(host, line);
  EXPECT_NE(ended.find(line), std::string::npos) << ended;
  EXPECT_EQ(host.Stop(), 0) << host.log();
}

// What a library writes to its standard output and error (a diagnostic, a sanitizer's report) is logged by the
// host as the runner's lines, as its log lines are: named by the host, escaped, bounded; never as the host's own.
TEST(Isolation, WhatARunnerWritesToItsStandardOutputAndErrorIsLoggedAsItsLines) {
  HostProcess host(CrasherGroup());
  ASSERT_TRUE(host.Start({kCrasher})) << host.error();
  v1::EchoResponse resp;
  auto s = Call(Dial(host.endpoint(kCrasher)), "/v1.Crasher/Stderr",
                Req("first\n2026-01-01T00:00:00.000+00:00 error [echo] forged\x1b[2J\nunfinished"), &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  std::string log = AwaitLog(host, "[echo] forged");
  EXPECT_NE(log.find(" warning [crasher] out\n"), std::string::npos) << log;
  EXPECT_NE(log.find(" warning [crasher] first\n"), std::string::npos) << log;
  EXPECT_NE(log.find(" warning [crasher] 2026-01-01T00:00:00.000+00:00 error [echo] forged\\x1b[2J\n"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("\n2026-01-01T00:00:00"), std::string::npos) << "a line of the runner's own making";
  EXPECT_EQ(log.find('\x1b'), std::string::npos);
  // A line it had not finished when its runner ended is logged then, before the line on the runner's end.
  EXPECT_EQ(host.Stop(), 0) << host.log();
  log = host.log();
  EXPECT_NE(log.find(" warning [crasher] unfinished"), std::string::npos) << log;
}

// A runner whose reading thread is stuck (a NONBLOCKING handler that blocks) takes no more calls: those sent to it
// meanwhile wait in the host up to the group's queued bytes, and the next are refused at once, naming the group.
TEST(Isolation, CallsARunnerDoesNotTakeAreBoundedInTheHost) {
  HostProcess host(CrasherGroup("hang_restart_seconds = 0\nmax_request_bytes = 1048576\n"),
                   "shutdown_timeout_seconds = 1\n");  // the hung handler never ends: its runner is killed
  ASSERT_TRUE(host.Start({kCrasher})) << host.error();
  auto crasher = Dial(host.endpoint(kCrasher));
  ASSERT_GT(CrasherPid(crasher), 0);
  auto hung = std::async(std::launch::async, [&] {
    v1::EchoResponse resp;
    return Call(crasher, "/v1.Crasher/HangInline", Req(), &resp, milliseconds(60000));
  });
  std::this_thread::sleep_for(milliseconds(300));
  const std::string megabyte(1000 * 1000, 'x');
  grpc::Status refused;
  int sent = 0;
  for (; sent < 40 && refused.ok(); ++sent) {
    v1::EchoResponse resp;
    grpc::Status s = Call(crasher, "/v1.Crasher/Pid", Req(megabyte), &resp, milliseconds(300));
    if (s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) refused = s;
  }
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_NE(refused.error_message().find("group 'crasher': its runner has not taken the "), std::string::npos)
      << refused.error_message();
  EXPECT_GE(sent, 15);  // the 16 MiB a group's queue holds were taken first
  EXPECT_LE(sent, 20);
  EXPECT_EQ(host.Stop(), 0) << host.log();
  EXPECT_NE(hung.get().error_code(), grpc::StatusCode::OK);
}

}  // namespace
}  // namespace csi_proxy::testing

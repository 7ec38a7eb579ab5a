// Every method a shipped group library (and the SDK's example) declares CSI_PROXY_METHOD_NONBLOCKING answers
// without a system call that can wait: the host runs such a method on the gRPC thread that read its request, where
// a wait would stall the calls of every group. Each method is called through the SDK's fake host on a thread of its
// own under a seccomp filter that lets only memory management, futex wakes and the thread's own bookkeeping
// through and traps everything else (files, sysfs, sockets, ioctls, sleeps, polls, process waits, futex waits);
// the test fails naming every trapped system call. Marking a blocking method NONBLOCKING makes it fail.
#include <gtest/gtest.h>
#include <linux/futex.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/stat.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <ctime>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "csi_proxy/testing/fake_host.hpp"
#include "temp_dir.h"

namespace csi_proxy::testing {
namespace {

using sdk::testing::FakeHost;

// What the SIGSYS handler saw: the numbers of the trapped system calls, in order (the first kMaxTraps).
constexpr int kMaxTraps = 64;
std::atomic<int> trap_count{0};
std::atomic<int> traps[kMaxTraps];

void OnTrap(int, siginfo_t* info, void* context) {
  int n = trap_count.fetch_add(1);
  if (n < kMaxTraps) traps[n].store(info->si_syscall);
  // The call is refused as the method would see a failing system call; it goes on and answers something.
  static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_RAX] = -EPERM;
}

// Installs the filter on the calling thread only (no TSYNC): everything but the allowed calls traps.
bool ForbidWaitingOnThisThread(std::string* error) {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_TRAP);
  if (ctx == nullptr) {
    *error = "seccomp_init failed";
    return false;
  }
  // Memory for the answer (malloc), the clock (vDSO, or its fallback), the thread's own ids and signal state, its
  // exit, and waking a futex waiter. A futex wait is refused: a lock whose holder may be doing I/O is what a
  // NONBLOCKING method must never wait for.
  int rc = 0;
  for (int nr : {SCMP_SYS(brk), SCMP_SYS(mmap), SCMP_SYS(munmap), SCMP_SYS(mremap), SCMP_SYS(madvise),
                 SCMP_SYS(mprotect), SCMP_SYS(clock_gettime), SCMP_SYS(gettimeofday), SCMP_SYS(getpid),
                 SCMP_SYS(gettid), SCMP_SYS(rt_sigreturn), SCMP_SYS(rt_sigprocmask), SCMP_SYS(exit)}) {
    rc = rc != 0 ? rc : seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
  }
  for (int op : {FUTEX_WAKE, FUTEX_WAKE_OP, FUTEX_WAKE_BITSET, FUTEX_UNLOCK_PI}) {
    rc = rc != 0 ? rc
                 : seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(futex), 1,
                                    SCMP_A1(SCMP_CMP_MASKED_EQ, static_cast<scmp_datum_t>(FUTEX_CMD_MASK) & 0xffffffffu,
                                            static_cast<scmp_datum_t>(op)));
  }
  rc = rc != 0 ? rc : seccomp_load(ctx);  // sets no_new_privs on this thread first
  seccomp_release(ctx);
  if (rc != 0) *error = "seccomp rules or load failed: " + std::string(strerror(-rc));
  return rc == 0;
}

// Runs `work` on a new thread under the filter; returns the names of the system calls it made that were trapped.
std::vector<std::string> TrappedCalls(const std::function<void()>& work) {
  trap_count.store(0);
  std::string error;
  bool installed = false;
  std::thread([&] {
    installed = ForbidWaitingOnThisThread(&error);
    if (installed) work();
  }).join();
  EXPECT_TRUE(installed) << error;
  std::vector<std::string> names;
  for (int i = 0; i < std::min(trap_count.load(), kMaxTraps); ++i) {
    char* name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, traps[i].load());
    names.push_back(name != nullptr ? name : std::to_string(traps[i].load()));
    free(name);
  }
  return names;
}

// A sanitizer's runtime makes system calls of its own on the thread (its interceptors, its thread teardown, its
// internal locks, which spin on a refused futex wait): under it the filter would judge the sanitizer, not the
// method. The normal build runs these tests.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitizerBuild = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitizerBuild = true;
#else
constexpr bool kSanitizerBuild = false;
#endif
#else
constexpr bool kSanitizerBuild = false;
#endif

class NonBlockingMethods : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kSanitizerBuild) GTEST_SKIP() << "a sanitizer build: its runtime's own system calls would be trapped";
  }

  static void SetUpTestSuite() {
    struct sigaction sa {};
    sa.sa_sigaction = &OnTrap;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    ASSERT_EQ(sigaction(SIGSYS, &sa, nullptr), 0);
  }

  // Loads `library` as the host does, starts it with its defaults in a private directory, makes the `setup`
  // calls (path, request bytes) without the filter, and calls each of its NONBLOCKING methods three times (a first
  // call may fill a cache) with a default request, under the filter. Returns the methods it called.
  std::vector<std::string> CheckLibrary(const std::string& library,
                                        const std::vector<std::pair<std::string, std::string>>& setup = {}) {
    TempDir dir;
    FakeHost host({.kubelet_path = dir.MakeDir("kubelet"), .working_dirs = {}, .state_dir = dir.MakeDir("state")});
    EXPECT_TRUE(host.Load(library).ok()) << library;
    EXPECT_TRUE(host.Negotiate().ok()) << library;
    auto init = host.Init();
    EXPECT_TRUE(init.ok()) << library << ": " << init.message();
    for (const auto& [path, request] : setup) {
      auto result = host.Call(path, request);
      EXPECT_TRUE(result.ok()) << path << ": " << result.message;
    }
    std::vector<std::string> called;
    for (const auto& method : host.methods()) {
      if ((method.flags & CSI_PROXY_METHOD_NONBLOCKING) == 0) continue;
      called.push_back(method.path);
      std::vector<sdk::testing::CallResult> results;
      auto trapped = TrappedCalls([&] {
        for (int i = 0; i < 3; ++i) results.push_back(host.Call(method.path, std::string_view()));
      });
      std::string list;
      for (const auto& name : trapped) list += " " + name;
      EXPECT_TRUE(trapped.empty()) << method.path
                                   << " is declared NONBLOCKING but made system calls that may wait:" << list;
      for (const auto& r : results) EXPECT_TRUE(r.completed) << method.path << " answered after its handler returned";
    }
    host.Shutdown();
    EXPECT_TRUE(host.violations().empty()) << library << ": " << host.violations().front();
    return called;
  }
};

TEST_F(NonBlockingMethods, TheFilterTrapsWhatWaits) {
  auto trapped = TrappedCalls([] {
    struct stat st {};
    (void)stat("/", &st);
    timespec nap{0, 1000};
    nanosleep(&nap, nullptr);
  });
  ASSERT_EQ(trapped.size(), 2u);
  EXPECT_TRUE(trapped[0] == "newfstatat" || trapped[0] == "stat" || trapped[0] == "statx") << trapped[0];
  EXPECT_TRUE(trapped[1] == "nanosleep" || trapped[1] == "clock_nanosleep") << trapped[1];
  // Memory and the clock pass.
  EXPECT_TRUE(TrappedCalls([] {
                std::vector<char> big(8 << 20, 'x');
                (void)std::chrono::steady_clock::now();
                EXPECT_EQ(big.back(), 'x');
              }).empty());
}

TEST_F(NonBlockingMethods, ShippedGroupsAnswerWithoutWaiting) {
  // An iSCSI portal registered first, so that ListTargetPortals has something to copy: AddTargetPortalRequest
  // {target_portal {target_address "127.0.0.1" target_port 3260}}, encoded by hand (no iSCSI classes here).
  const std::string portal = std::string("\x0a\x0e\x0a\x09", 4) + "127.0.0.1" + std::string("\x10\xbc\x19", 3);
  std::vector<std::string> called;
  for (const char* library : {CSI_PROXY_DISK_LIBRARY, CSI_PROXY_VOLUME_LIBRARY, CSI_PROXY_FILESYSTEM_LIBRARY,
                              CSI_PROXY_SMB_LIBRARY, CSI_PROXY_SYSTEM_LIBRARY}) {
    auto methods = CheckLibrary(library);
    called.insert(called.end(), methods.begin(), methods.end());
  }
  auto iscsi = CheckLibrary(CSI_PROXY_ISCSI_LIBRARY, {{"/v1alpha2.Iscsi/AddTargetPortal", portal}});
  called.insert(called.end(), iscsi.begin(), iscsi.end());
  // The test is not empty: the methods declared NONBLOCKING today are among those it called.
  EXPECT_NE(std::find(called.begin(), called.end(), "/v1alpha2.Iscsi/ListTargetPortals"), called.end());
}

TEST_F(NonBlockingMethods, TheExampleGroupAnswersWithoutWaiting) {
  auto called = CheckLibrary(CSI_PROXY_ECHO_LIBRARY);
  EXPECT_NE(std::find(called.begin(), called.end(), "/v1.Echo/Echo"), called.end());
  EXPECT_NE(std::find(called.begin(), called.end(), "/v1alpha1.Echo/Echo"), called.end());
}

}  // namespace
}  // namespace csi_proxy::testing

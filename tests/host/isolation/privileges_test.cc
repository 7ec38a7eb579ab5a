// ApplyGroupPrivileges for real: each test forks a child that confines itself and then tries what a group would
// (mount, write a root file, kexec, grow past its limits), reporting what happened through a pipe; the parent
// asserts on the report. Needs root (skips without), like the runner it is for.
#include "isolation/privileges.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/reboot.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/capability.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>

namespace csi_proxy::host {
namespace {

namespace fs = std::filesystem;

// An account no process on the machine uses, so that RLIMIT_NPROC counts only the test's tasks.
constexpr uint32_t kTestUid = 64123;
constexpr uint32_t kTestGid = 64124;

using Report = std::map<std::string, std::string>;

// What a probe in the child returns: "ok" or the errno's name.
std::string Outcome(long rc) {
  if (rc >= 0) return "ok";
  switch (errno) {
    case EPERM:
      return "EPERM";
    case EACCES:
      return "EACCES";
    case EMFILE:
      return "EMFILE";
    case ENOMEM:
      return "ENOMEM";
    case EAGAIN:
      return "EAGAIN";
    default:
      return std::string("errno ") + std::to_string(errno) + " (" + std::strerror(errno) + ")";
  }
}

// A line of /proc/self/status ("CapEff", "Seccomp"), its value trimmed.
std::string StatusField(const std::string& name) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + ":", 0) == 0) {
      std::string value = line.substr(name.size() + 1);
      const size_t begin = value.find_first_not_of(" \t");
      if (begin == std::string::npos) return "";
      return value.substr(begin, value.find_last_not_of(" \t") + 1 - begin);
    }
  }
  return "";
}

// The /proc/self/status form of a capability set: 16 hex digits.
std::string Mask(std::initializer_list<int> capabilities) {
  uint64_t mask = 0;
  for (int c : capabilities) mask |= uint64_t{1} << c;
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(mask));
  return text;
}

// Forks; the child runs `setup` (as the host would before starting a runner, e.g. a private mount namespace),
// applies `privileges` with the test's process as the host it may not signal, runs `probe` (`after_refusal` when they
// were refused) and sends back the report ("apply" holds ApplyGroupPrivileges' answer).
Report InChild(
    const GroupPrivileges& privileges, const std::function<void(Report&)>& probe,
    const std::function<void()>& setup = [] {}, const std::function<void(Report&)>& after_refusal = [](Report&) {}) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return {{"harness", "pipe failed"}};
  pid_t pid = fork();
  if (pid < 0) return {{"harness", "fork failed"}};
  if (pid == 0) {
    close(pipe_fds[0]);
    Report report;
    setup();
    Status applied = ApplyGroupPrivileges(privileges, getppid());  // the test stands for the host
    report["apply"] = applied.ok() ? "ok" : CodeName(static_cast<int32_t>(applied.code())) + ": " + applied.message();
    if (applied.ok()) {
      probe(report);
    } else {
      after_refusal(report);
    }
    std::string text;
    for (const auto& [key, value] : report) text += key + "=" + value + "\n";
    for (size_t done = 0; done < text.size();) {
      ssize_t n = write(pipe_fds[1], text.data() + done, text.size() - done);
      if (n <= 0) _exit(2);
      done += static_cast<size_t>(n);
    }
    _exit(0);
  }
  close(pipe_fds[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = read(pipe_fds[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  close(pipe_fds[0]);
  int wstatus = 0;
  waitpid(pid, &wstatus, 0);
  Report report;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    auto eq = line.find('=');
    report[line.substr(0, eq)] = line.substr(eq + 1);
  }
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0)
    report["harness"] = "the child died: " + std::to_string(wstatus);
  return report;
}

GroupPrivileges With(std::initializer_list<const char*> capabilities) {
  GroupPrivileges p;
  for (const char* name : capabilities) p.capabilities.push_back(*CapabilityFromName(name));
  std::sort(p.capabilities.begin(), p.capabilities.end());
  return p;
}

bool Holds(int capability) {
  cap_t now = cap_get_proc();
  cap_flag_value_t value = CAP_CLEAR;
  cap_get_flag(now, capability, CAP_PERMITTED, &value);
  cap_free(now);
  return value == CAP_SET;
}

class Privileges : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: a runner confines itself from root";
    char dir_template[] = "/tmp/csi-proxy-privileges-XXXXXX";
    ASSERT_NE(mkdtemp(dir_template), nullptr);
    dir_ = dir_template;
    ASSERT_EQ(chmod(dir_.c_str(), 0711), 0);  // another user may pass through, not list
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  std::string dir_;
};

// A private mount namespace, so that a mount the child makes dies with it and the node never sees it.
void PrivateMounts() {
  if (unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) _exit(3);
}

TEST_F(Privileges, MountNeedsCapSysAdmin) {
  const std::string target = dir_ + "/mnt";
  ASSERT_EQ(mkdir(target.c_str(), 0755), 0);
  auto try_mount = [&](Report& r) {
    r["mount"] = Outcome(mount("csi-proxy-test", target.c_str(), "tmpfs", 0, "size=1m"));
    if (r["mount"] == "ok") r["umount"] = Outcome(umount2(target.c_str(), 0));
  };
  Report without = InChild(With({"CAP_DAC_OVERRIDE"}), try_mount, PrivateMounts);
  EXPECT_EQ(without["apply"], "ok");
  EXPECT_EQ(without["mount"], "EPERM");
  Report with = InChild(With({"CAP_SYS_ADMIN"}), try_mount, PrivateMounts);
  EXPECT_EQ(with["apply"], "ok");
  EXPECT_EQ(with["mount"], "ok");
  EXPECT_EQ(with["umount"], "ok");
  EXPECT_EQ(without.count("harness") + with.count("harness"), 0u) << without["harness"] << with["harness"];
}

TEST_F(Privileges, ANonRootUserWritesARootFileOnlyWithCapDacOverride) {
  const std::string file = dir_ + "/root-only";
  { std::ofstream(file) << "root's\n"; }
  ASSERT_EQ(chmod(file.c_str(), 0600), 0);
  auto try_write = [&](Report& r) {
    int fd = open(file.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    r["write"] = Outcome(fd);
    if (fd >= 0) close(fd);
    r["uid"] = std::to_string(getuid());
    r["CapEff"] = StatusField("CapEff");
    r["CapAmb"] = StatusField("CapAmb");
  };
  GroupPrivileges without;
  without.user = kTestUid;
  without.group = kTestGid;
  Report refused = InChild(without, try_write);
  EXPECT_EQ(refused["apply"], "ok");
  EXPECT_EQ(refused["uid"], std::to_string(kTestUid));
  EXPECT_EQ(refused["write"], "EACCES");

  GroupPrivileges with = With({"CAP_DAC_OVERRIDE"});
  with.user = kTestUid;
  with.group = kTestGid;
  Report allowed = InChild(with, try_write);
  EXPECT_EQ(allowed["apply"], "ok");
  EXPECT_EQ(allowed["uid"], std::to_string(kTestUid));
  EXPECT_EQ(allowed["write"], "ok");  // the capability survived the change of user
  EXPECT_EQ(allowed["CapEff"], Mask({CAP_DAC_OVERRIDE}));
  EXPECT_EQ(allowed["CapAmb"], Mask({CAP_DAC_OVERRIDE}));  // and programs it runs keep it
}

TEST_F(Privileges, TheFilterRefusesKexecModulesRebootPtraceAndTypingIntoTerminalsEvenWithTheirCapabilities) {
  // With the capabilities held, the kernel would answer these (bad) arguments EINVAL, EBADF, ENOSYS or 0; only the
  // filter answers EPERM.
  for (int capability : {CAP_SYS_BOOT, CAP_SYS_MODULE, CAP_SYS_PTRACE, CAP_SYS_ADMIN}) {
    if (!Holds(capability)) GTEST_SKIP() << "this process lacks " << CapabilityName(capability);
  }
  auto try_forbidden = [](Report& r) {
    r["kexec_load"] = Outcome(syscall(SYS_kexec_load, 0UL, 0UL, nullptr, 0xdead0000UL));
    r["kexec_file_load"] = Outcome(syscall(SYS_kexec_file_load, -1, -1, 0UL, nullptr, 0xdead0000UL));
    r["init_module"] = Outcome(syscall(SYS_init_module, nullptr, 0UL, ""));
    r["finit_module"] = Outcome(syscall(SYS_finit_module, -1, "", 0));
    r["delete_module"] = Outcome(syscall(SYS_delete_module, "csi_proxy_no_such_module", O_NONBLOCK));
    r["reboot"] = Outcome(syscall(SYS_reboot, 0, 0, 0, nullptr));  // wrong magic: never a reboot
    r["ptrace"] = Outcome(ptrace(PTRACE_TRACEME, 0, nullptr, nullptr));
    char byte = 0, copy = 0;
    iovec local{&copy, 1}, remote{&byte, 1};
    r["process_vm_readv"] = Outcome(process_vm_readv(getpid(), &local, 1, &remote, 1, 0));
    r["process_vm_writev"] = Outcome(process_vm_writev(getpid(), &local, 1, &remote, 1, 0));
    r["bpf"] = Outcome(syscall(SYS_bpf, -1, nullptr, 0));
    r["swapon"] = Outcome(syscall(SYS_swapon, "/csi-proxy-no-such-swap", 0));
    // Typing into a terminal: on no descriptor at all, the kernel would answer EBADF; the filter answers first.
    char key = 'x';
    r["ioctl TIOCSTI"] = Outcome(ioctl(-1, TIOCSTI, &key));
    r["ioctl TIOCLINUX"] = Outcome(ioctl(-1, TIOCLINUX, &key));
    winsize size{};
    r["ioctl TIOCGWINSZ"] = Outcome(ioctl(-1, TIOCGWINSZ, &size));
    r["NoNewPrivs"] = StatusField("NoNewPrivs");
    r["Seccomp"] = StatusField("Seccomp");
    r["getpid"] = Outcome(getpid());  // what is not listed still works
  };
  Report report = InChild(With({"CAP_SYS_BOOT", "CAP_SYS_MODULE", "CAP_SYS_PTRACE", "CAP_SYS_ADMIN"}), try_forbidden);
  EXPECT_EQ(report["apply"], "ok");
  for (const char* call : {"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot",
                           "ptrace", "process_vm_readv", "process_vm_writev", "bpf", "swapon", "ioctl TIOCSTI",
                           "ioctl TIOCLINUX"}) {
    if (SanitizerBuildRelaxesPrivileges() && std::string_view(call) == "ptrace") continue;
    EXPECT_EQ(report[call], "EPERM") << call;
  }
  EXPECT_EQ(report["NoNewPrivs"], "1");
  EXPECT_EQ(report["Seccomp"], "2");  // a filter
  EXPECT_EQ(report["getpid"], "ok");
  EXPECT_EQ(report["ioctl TIOCGWINSZ"], "errno 9 (Bad file descriptor)");  // other requests reach the kernel
}

// The signals a runner running as root may send without CAP_KILL (to every process of its uid): its host, the
// host's process group and every process at once are refused; its own process, threads, group, children and their
// groups are not, so that raise, abort, pthread_kill and a library stopping the programs it ran keep working. Signal 0
// probes the right to signal and sends nothing.
TEST_F(Privileges, TheFilterRefusesSignalsToTheHostEveryoneAndOtherGroupsButNotToItsOwnProcesses) {
  const pid_t test_group = getpgrp();
  Report report = InChild(
      GroupPrivileges{},
      [&](Report& r) {
        const pid_t host = getppid();
        r["kill host"] = Outcome(kill(host, 0));
        // The kernel reads a pid's lower 32 bits only: a filter comparing all 64 would let this one through.
        r["kill host, upper bits set"] =
            Outcome(syscall(SYS_kill, static_cast<long>(static_cast<uint32_t>(host)) | (1L << 32), 0));
        r["kill -1"] = Outcome(kill(-1, 0));
        r["kill -1, upper bits clear"] = Outcome(syscall(SYS_kill, 0xffffffffL, 0));
        r["kill the host's group"] = Outcome(kill(-test_group, 0));
        r["tgkill host"] = Outcome(syscall(SYS_tgkill, host, host, 0));
        siginfo_t info{};
        info.si_code = SI_QUEUE;
        info.si_pid = getpid();
        info.si_uid = getuid();
        r["rt_sigqueueinfo host"] = Outcome(syscall(SYS_rt_sigqueueinfo, host, 0, &info));
        r["rt_tgsigqueueinfo host"] = Outcome(syscall(SYS_rt_tgsigqueueinfo, host, host, 0, &info));
        const long pidfd = syscall(SYS_pidfd_open, host, 0);
        r["pidfd_open host"] = Outcome(pidfd);
        if (pidfd >= 0) close(static_cast<int>(pidfd));
        r["tkill self"] = Outcome(syscall(SYS_tkill, gettid(), 0));

        r["kill 0"] = Outcome(kill(0, 0));
        r["killpg own group"] = Outcome(killpg(getpgrp(), 0));
        r["kill self"] = Outcome(kill(getpid(), 0));
        r["tgkill own thread"] = Outcome(syscall(SYS_tgkill, getpid(), gettid(), 0));
        std::thread other([] { pause(); });
        r["pthread_kill another thread"] = pthread_kill(other.native_handle(), 0) == 0 ? "ok" : "failed";
        static std::atomic<int> caught{0};
        signal(SIGUSR1, [](int) { ++caught; });
        r["raise"] = Outcome(raise(SIGUSR1));
        r["caught"] = std::to_string(caught.load());
        // A child it ran: stopped by pid, and one whose abort() ends it with SIGABRT (abort uses tgkill).
        const pid_t sleeper = fork();
        if (sleeper == 0) {
          pause();
          _exit(0);
        }
        r["kill child"] = Outcome(kill(sleeper, SIGKILL));
        int status = 0;
        waitpid(sleeper, &status, 0);
        r["child ended by"] = WIFSIGNALED(status) ? sigabbrev_np(WTERMSIG(status)) : "exit";
        // A program in a group of its own, stopped with its group, as the shipped groups' RunProgram does.
        const pid_t leader = fork();
        if (leader == 0) {
          setpgid(0, 0);
          pause();
          _exit(0);
        }
        setpgid(leader, leader);  // either side's call makes it so before the kill
        r["kill a child's group"] = Outcome(kill(-leader, SIGKILL));
        waitpid(leader, &status, 0);
        r["child's group ended by"] = WIFSIGNALED(status) ? sigabbrev_np(WTERMSIG(status)) : "exit";
        const pid_t aborter = fork();
        if (aborter == 0) {
          signal(SIGABRT, SIG_DFL);
          abort();
        }
        waitpid(aborter, &status, 0);
        r["aborting child ended by"] = WIFSIGNALED(status) ? sigabbrev_np(WTERMSIG(status)) : "exit";
        pthread_kill(other.native_handle(), SIGUSR1);  // ends its pause
        other.join();
      },
      [] {
        if (setpgid(0, 0) < 0) _exit(6);  // as the host starts a runner: its own group
      });
  EXPECT_EQ(report["apply"], "ok");
  for (const char* refused :
       {"kill host", "kill host, upper bits set", "kill -1", "kill -1, upper bits clear", "kill the host's group",
        "tgkill host", "rt_sigqueueinfo host", "rt_tgsigqueueinfo host", "pidfd_open host", "tkill self"}) {
    EXPECT_EQ(report[refused], "EPERM") << refused;
  }
  for (const char* allowed : {"kill 0", "killpg own group", "kill self", "tgkill own thread",
                              "pthread_kill another thread", "raise", "kill child", "kill a child's group"}) {
    EXPECT_EQ(report[allowed], "ok") << allowed;
  }
  EXPECT_EQ(report["caught"], "1");
  EXPECT_EQ(report["child ended by"], "KILL");
  EXPECT_EQ(report["child's group ended by"], "KILL");
  EXPECT_EQ(report["aborting child ended by"], "ABRT");
  EXPECT_EQ(report.count("harness"), 0u) << report["harness"];
}

TEST_F(Privileges, MemoryAndOpenFileLimitsAreInEffect) {
  if (SanitizerBuildRelaxesPrivileges()) GTEST_SKIP() << "a sanitizer build sets no memory limit (privileges.h)";
  GroupPrivileges p;
  p.max_memory_bytes = 256 << 20;
  p.max_open_files = 32;
  Report report = InChild(p, [](Report& r) {
    auto map = [](size_t bytes) {
      void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      long rc = m == MAP_FAILED ? -1 : 0;
      std::string outcome = Outcome(rc);
      if (m != MAP_FAILED) munmap(m, bytes);
      return outcome;
    };
    r["map 16 MiB"] = map(16 << 20);
    r["map 512 MiB"] = map(512 << 20);
    void* big = std::malloc(size_t{512} << 20);
    r["malloc 512 MiB"] = big == nullptr ? "NULL" : "allocated";
    std::free(big);
    int last = -1;
    int fd;
    while ((fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0) last = fd;
    r["open past the limit"] = Outcome(fd);
    r["highest fd"] = std::to_string(last);
  });
  EXPECT_EQ(report["apply"], "ok");
  EXPECT_EQ(report["map 16 MiB"], "ok");
  EXPECT_EQ(report["map 512 MiB"], "ENOMEM");
  EXPECT_EQ(report["malloc 512 MiB"], "NULL");
  EXPECT_EQ(report["open past the limit"], "EMFILE");
  EXPECT_EQ(report["highest fd"], "31");
}

TEST_F(Privileges, MaxTasksBoundsTheTasksOfANonRootUser) {
  GroupPrivileges p;
  p.user = kTestUid;
  p.group = kTestGid;
  p.max_tasks = 2;  // the child and one more
  Report report = InChild(p, [](Report& r) {
    pid_t first = fork();
    if (first == 0) {
      pause();
      _exit(0);
    }
    r["first fork"] = Outcome(first);
    pid_t second = fork();
    if (second == 0) _exit(0);
    r["second fork"] = Outcome(second);
    if (first > 0) kill(first, SIGKILL), waitpid(first, nullptr, 0);
    if (second > 0) waitpid(second, nullptr, 0);
  });
  EXPECT_EQ(report["apply"], "ok");
  EXPECT_EQ(report["first fork"], "ok");
  EXPECT_EQ(report["second fork"], "EAGAIN");
}

TEST_F(Privileges, TheAccountAndTheCapabilitySetsAreExactlyWhatWasAsked) {
  GroupPrivileges p = With({"CAP_SYS_ADMIN", "CAP_DAC_OVERRIDE"});
  p.user = kTestUid;
  p.group = kTestGid;
  Report report = InChild(p, [](Report& r) {
    uid_t ruid, euid, suid;
    gid_t rgid, egid, sgid;
    getresuid(&ruid, &euid, &suid);
    getresgid(&rgid, &egid, &sgid);
    r["uids"] = std::to_string(ruid) + "," + std::to_string(euid) + "," + std::to_string(suid);
    r["gids"] = std::to_string(rgid) + "," + std::to_string(egid) + "," + std::to_string(sgid);
    r["Groups"] = StatusField("Groups");
    for (const char* set : {"CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb", "NoNewPrivs"}) r[set] = StatusField(set);
    r["no_new_privs"] = std::to_string(prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0));
    r["setuid(0)"] = Outcome(setuid(0));  // no way back to root
  });
  EXPECT_EQ(report["apply"], "ok");
  const std::string uid = std::to_string(kTestUid), gid = std::to_string(kTestGid);
  EXPECT_EQ(report["uids"], uid + "," + uid + "," + uid);
  EXPECT_EQ(report["gids"], gid + "," + gid + "," + gid);
  EXPECT_EQ(report["Groups"], gid);  // the host's supplementary groups are gone
  const std::string mask = Mask({CAP_SYS_ADMIN, CAP_DAC_OVERRIDE});
  for (const char* set : {"CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb"}) EXPECT_EQ(report[set], mask) << set;
  EXPECT_EQ(report["no_new_privs"], "1");
  EXPECT_EQ(report["setuid(0)"], "EPERM");
}

TEST_F(Privileges, WithoutUserOrGroupTheProcessStaysRootWithNoCapabilityAtAll) {
  Report report = InChild(GroupPrivileges{}, [](Report& r) {
    r["uid"] = std::to_string(geteuid());
    r["CapEff"] = StatusField("CapEff");
    r["CapBnd"] = StatusField("CapBnd");
    r["chown"] = Outcome(chown("/", 1, 1));  // CAP_CHOWN is gone even for root
  });
  EXPECT_EQ(report["apply"], "ok");
  EXPECT_EQ(report["uid"], "0");
  EXPECT_EQ(report["CapEff"], Mask({}));
  EXPECT_EQ(report["CapBnd"], Mask({}));
  EXPECT_EQ(report["chown"], "EPERM");
}

TEST_F(Privileges, ACapabilityTheProcessDoesNotHoldIsRefusedBeforeAnythingChanges) {
  GroupPrivileges p = With({"CAP_SYS_ADMIN"});
  p.max_open_files = 64;
  // The child gives up CAP_SYS_ADMIN first, as a host under a narrower CapabilityBoundingSet would lack it; the
  // probe runs whatever the answer, since it checks what the refusal left.
  Report report = InChild(
      p, [](Report&) {},
      [] {
        cap_t now = cap_get_proc();
        cap_value_t value = CAP_SYS_ADMIN;
        cap_set_flag(now, CAP_EFFECTIVE, 1, &value, CAP_CLEAR);
        cap_set_flag(now, CAP_PERMITTED, 1, &value, CAP_CLEAR);
        if (cap_set_proc(now) != 0) _exit(4);
        cap_free(now);
      },
      [](Report& r) {
        rlimit nofile{};
        getrlimit(RLIMIT_NOFILE, &nofile);
        r["RLIMIT_NOFILE"] = std::to_string(nofile.rlim_cur);
        r["NoNewPrivs"] = StatusField("NoNewPrivs");
        r["Seccomp"] = StatusField("Seccomp");
        r["CapBnd"] = StatusField("CapBnd");
      });
  EXPECT_EQ(report["apply"].rfind("FAILED_PRECONDITION: this process does not hold CAP_SYS_ADMIN", 0), 0u)
      << report["apply"];
  EXPECT_NE(report["RLIMIT_NOFILE"], "64");
  EXPECT_EQ(report["NoNewPrivs"], "0");
  EXPECT_EQ(report["Seccomp"], "0");
  EXPECT_EQ(report["CapBnd"], StatusField("CapBnd"));  // the parent's: nothing dropped
}

TEST_F(Privileges, ALimitAboveTheProcesssOwnIsRefusedNotRaised) {
  GroupPrivileges p;
  p.max_open_files = 200;
  Report report = InChild(
      p, [](Report&) {},
      [] {
        rlimit low{100, 100};
        if (setrlimit(RLIMIT_NOFILE, &low) != 0) _exit(5);
      },
      [](Report& r) { r["Seccomp"] = StatusField("Seccomp"); });
  EXPECT_EQ(report["apply"],
            "FAILED_PRECONDITION: max_open_files 200 is above this process's own hard limit, 100, which a "
            "confinement does not raise");
  EXPECT_EQ(report["Seccomp"], "0");
}

TEST_F(Privileges, AMultiThreadedProcessIsRefused) {
  Report report = InChild(
      GroupPrivileges{}, [](Report&) {},
      [] {
        static std::thread sleeper([] { pause(); });  // never joined: the child exits with it
      });
  EXPECT_EQ(report["apply"].rfind("FAILED_PRECONDITION: confining a process needs it single-threaded", 0), 0u)
      << report["apply"];
}

TEST_F(Privileges, EveryShippedGroupsDefaultsApplyWhereTheProcessHoldsThem) {
  for (const char* group : {"disk", "volume", "filesystem", "smb", "iscsi", "system", "thirdparty"}) {
    GroupPrivileges p = DefaultGroupPrivileges(group);
    std::string missing;
    for (int c : p.capabilities) {
      if (!Holds(c)) missing += (missing.empty() ? "" : ",") + CapabilityName(c);
    }
    Report report = InChild(p, [](Report& r) { r["CapEff"] = StatusField("CapEff"); });
    if (missing.empty()) {
      EXPECT_EQ(report["apply"], "ok") << group;
      uint64_t mask = 0;
      for (int c : p.capabilities) mask |= uint64_t{1} << c;
      char expected[17];
      std::snprintf(expected, sizeof expected, "%016llx", static_cast<unsigned long long>(mask));
      EXPECT_EQ(report["CapEff"], expected) << group;
    } else {
      // This machine's bounding set lacks one (a container without CAP_SYS_RESOURCE): refused by name.
      EXPECT_EQ(report["apply"].rfind("FAILED_PRECONDITION: this process does not hold " + missing, 0), 0u)
          << group << ": " << report["apply"];
    }
  }
}

// What the filesystem group's default set is for: paths in directories pods' users own, sticky ones included.
TEST_F(Privileges, TheFilesystemDefaultsWorkInDirectoriesOthersOwnAndTheIscsiDefaultsDoNot) {
  const std::string pod_dir = dir_ + "/pod", sticky = dir_ + "/sticky", their_file = sticky + "/theirs";
  ASSERT_EQ(mkdir(pod_dir.c_str(), 0700), 0);
  ASSERT_EQ(chown(pod_dir.c_str(), kTestUid, kTestGid), 0);
  ASSERT_EQ(mkdir(sticky.c_str(), 01777), 0);
  ASSERT_EQ(chmod(sticky.c_str(), 01777), 0);  // the umask took the sticky bit's companions
  ASSERT_EQ(chown(sticky.c_str(), kTestUid, kTestGid), 0);
  auto probe = [&](Report& r) {
    const std::string made = pod_dir + "/made-" + std::to_string(getpid());
    r["mkdir in a pod's directory"] = Outcome(mkdir(made.c_str(), 0750));
    if (r["mkdir in a pod's directory"] == "ok") rmdir(made.c_str());
    r["unlink another's file in a sticky directory"] = Outcome(unlink(their_file.c_str()));
  };
  { std::ofstream(their_file) << "x"; }
  ASSERT_EQ(chown(their_file.c_str(), kTestUid, kTestGid), 0);
  Report iscsi = InChild(DefaultGroupPrivileges("iscsi"), probe);
  EXPECT_EQ(iscsi["apply"], "ok");
  EXPECT_EQ(iscsi["mkdir in a pod's directory"], "EACCES");
  EXPECT_EQ(iscsi["unlink another's file in a sticky directory"], "EPERM");

  GroupPrivileges dac_only = With({"CAP_DAC_OVERRIDE"});
  Report without_fowner = InChild(dac_only, probe);
  EXPECT_EQ(without_fowner["mkdir in a pod's directory"], "ok");
  EXPECT_EQ(without_fowner["unlink another's file in a sticky directory"], "EPERM");  // why CAP_FOWNER is there

  Report filesystem = InChild(DefaultGroupPrivileges("filesystem"), probe);
  EXPECT_EQ(filesystem["apply"], "ok");
  EXPECT_EQ(filesystem["mkdir in a pod's directory"], "ok");
  EXPECT_EQ(filesystem["unlink another's file in a sticky directory"], "ok");
}

// Not root: what the runner's refusal list and the capability names mean to libcap and libseccomp.
TEST(PrivilegeTables, CapabilityNamesAreLibcapsAndTheKernels) {
  for (int c = 0; c <= LastNamedCapability(); ++c) {
    char* name = cap_to_name(c);
    std::string lower = CapabilityName(c);
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    EXPECT_EQ(lower, name) << c;
    cap_free(name);
  }
  EXPECT_EQ(CapabilityFromName("CAP_SYS_ADMIN"), CAP_SYS_ADMIN);
  EXPECT_EQ(CapabilityFromName("cap_sys_admin"), std::nullopt);
}

TEST(PrivilegeTables, EveryRefusedCallIsASystemCallOfThisArchitecture) {
  for (std::string_view name : RefusedSystemCalls()) {
    EXPECT_GE(seccomp_syscall_resolve_name(std::string(name).c_str()), 0) << name;
  }
}

}  // namespace
}  // namespace csi_proxy::host

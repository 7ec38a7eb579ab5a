// See cleanup.h. Only async-signal-safe calls happen in the handler.
#include "cleanup.h"

#include <linux/loop.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>

namespace csi_proxy::testing {
namespace {

constexpr int kSlots = 512;
constexpr size_t kPathMax = 256;

struct IntTable {
  std::array<std::atomic<int>, kSlots> values;  // -1: free
  IntTable() {
    for (auto& v : values) v.store(-1);
  }
  int Add(int value) {
    for (int i = 0; i < kSlots; ++i) {
      int expected = -1;
      if (values[i].compare_exchange_strong(expected, value)) return i;
    }
    return -1;
  }
  void Remove(int slot) {
    if (slot >= 0 && slot < kSlots) values[slot].store(-1);
  }
};

struct PathTable {
  std::array<std::array<char, kPathMax>, kSlots> paths{};
  std::array<std::atomic<int>, kSlots> state;  // 0 free, 1 being written, 2 valid
  std::mutex mu;                               // writers only; the handler never takes it
  PathTable() {
    for (auto& s : state) s.store(0);
  }
  int Add(const std::string& path) {
    if (path.size() >= kPathMax) return -1;
    std::lock_guard lock(mu);
    for (int i = 0; i < kSlots; ++i) {
      if (state[i].load() != 0) continue;
      state[i].store(1);
      std::memcpy(paths[i].data(), path.c_str(), path.size() + 1);
      state[i].store(2, std::memory_order_release);
      return i;
    }
    return -1;
  }
  void Remove(int slot) {
    if (slot >= 0 && slot < kSlots) state[slot].store(0);
  }
};

IntTable& Children() {
  static IntTable t;
  return t;
}
IntTable& Loops() {
  static IntTable t;
  return t;
}
PathTable& Mounts() {
  static PathTable t;
  return t;
}
PathTable& Paths() {
  static PathTable t;
  return t;
}

void UndoEverything() {
  for (auto& v : Children().values) {
    int pid = v.exchange(-1);
    if (pid > 0) kill(pid, SIGKILL);
  }
  // Innermost mounts were registered last: undo in reverse order.
  auto& mounts = Mounts();
  for (int i = kSlots - 1; i >= 0; --i) {
    if (mounts.state[i].load(std::memory_order_acquire) == 2) umount2(mounts.paths[i].data(), MNT_DETACH);
  }
  for (auto& v : Loops().values) {
    int fd = v.exchange(-1);
    if (fd >= 0) ioctl(fd, LOOP_CLR_FD, 0);
  }
  auto& paths = Paths();
  for (int i = kSlots - 1; i >= 0; --i) {
    if (paths.state[i].load(std::memory_order_acquire) != 2) continue;
    struct stat st {};
    if (lstat(paths.paths[i].data(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      rmdir(paths.paths[i].data());
    } else {
      unlink(paths.paths[i].data());
    }
  }
}

// SIGABRT (a failed assertion, std::terminate) arrives on the thread that failed: undo what can be undone with
// async-signal-safe calls, then let it end the process.
void OnAbort(int sig) {
  static const char kMsg[] = "\ncsi-proxy bench: aborted; releasing loop devices, mounts and child processes\n";
  ssize_t ignored = write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
  (void)ignored;
  UndoEverything();
  signal(sig, SIG_DFL);
  raise(sig);
}

// Stop signals are blocked in every thread and taken by this one, which may then clean up like normal code:
// after the undo above it also removes the scratch directories (registered paths) recursively.
void StopSignalThread(sigset_t stop_signals) {
  int sig = 0;
  if (sigwait(&stop_signals, &sig) != 0) return;
  std::fprintf(stderr, "\ncsi-proxy bench: %s; releasing loop devices, mounts and child processes\n", strsignal(sig));
  UndoEverything();
  auto& paths = Paths();
  for (int i = kSlots - 1; i >= 0; --i) {
    if (paths.state[i].load(std::memory_order_acquire) != 2) continue;
    std::error_code ec;
    std::filesystem::remove_all(paths.paths[i].data(), ec);
  }
  signal(sig, SIG_DFL);
  pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);
  raise(sig);
  _exit(128 + sig);
}

}  // namespace

void InstallCleanupHandlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Construct the tables now, never inside a handler.
    Children();
    Loops();
    Mounts();
    Paths();
    // Called first thing in main, before any thread exists, so every later thread inherits the blocked mask.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&stop_signals, sig);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
    std::thread(StopSignalThread, stop_signals).detach();
    struct sigaction sa {};
    sa.sa_handler = OnAbort;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGABRT, &sa, nullptr);
    signal(SIGPIPE, SIG_IGN);
  });
}

int RegisterChild(pid_t pid) { return Children().Add(static_cast<int>(pid)); }
int RegisterLoopDevice(int fd) { return Loops().Add(fd); }
int RegisterMount(const std::string& target) { return Mounts().Add(target); }
int RegisterPath(const std::string& path) { return Paths().Add(path); }
void UnregisterChild(int slot) { Children().Remove(slot); }
void UnregisterLoopDevice(int slot) { Loops().Remove(slot); }
void UnregisterMount(int slot) { Mounts().Remove(slot); }
void UnregisterPath(int slot) { Paths().Remove(slot); }

}  // namespace csi_proxy::testing

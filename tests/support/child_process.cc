// See child_process.h.
#include "child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <thread>
#include <utility>

#include "cleanup.h"

namespace csi_proxy::testing {

ChildProcess::~ChildProcess() { Kill(); }

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), cleanup_slot_(std::exchange(other.cleanup_slot_, -1)) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    Kill();
    pid_ = std::exchange(other.pid_, -1);
    cleanup_slot_ = std::exchange(other.cleanup_slot_, -1);
  }
  return *this;
}

StatusOr<ChildProcess> ChildProcess::Start(const std::vector<std::string>& argv, const std::string& log_path) {
  if (argv.empty() || argv[0].empty() || argv[0][0] != '/') return InvalidArgument("argv[0] must be an absolute path");
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log_fd < 0) return Internal("cannot open " + log_path + ": " + std::strerror(errno));
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    close(log_fd);
    return Internal(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    // Only async-signal-safe calls until exec: the parent has gRPC threads.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    // A process group of its own, as a service manager starts a service: a process of the child's group that
    // signals its whole group (what the isolation tests make a runner try) cannot reach the test or ctest.
    setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    execv(args[0], args.data());
    _exit(127);
  }
  close(log_fd);
  ChildProcess child;
  child.pid_ = pid;
  child.cleanup_slot_ = RegisterChild(pid);
  return child;
}

bool ChildProcess::Exited(int* exit_status) {
  if (pid_ <= 0) return true;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) != pid_) return false;
  if (exit_status != nullptr) *exit_status = status;
  UnregisterChild(cleanup_slot_);
  pid_ = -1;
  return true;
}

int ChildProcess::Stop(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (Exited(&status)) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  Kill();
  return -1;
}

void ChildProcess::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  UnregisterChild(cleanup_slot_);
  pid_ = -1;
}

ProcessMemory ReadProcessMemory(pid_t pid) {
  ProcessMemory m;
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    auto value = [&](const char* key) -> int64_t { return std::strtoll(line.c_str() + std::strlen(key), nullptr, 10); };
    if (line.rfind("VmRSS:", 0) == 0) m.rss_kib = value("VmRSS:");
    if (line.rfind("VmHWM:", 0) == 0) m.hwm_kib = value("VmHWM:");
    if (line.rfind("Threads:", 0) == 0) m.threads = value("Threads:");
  }
  return m;
}

}  // namespace csi_proxy::testing

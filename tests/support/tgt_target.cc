// A private tgtd on loopback for tests; see tgt_target.h.
#include "tgt_target.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "loopback_port.h"
#include "run_program.h"

namespace csi_proxy::test_support {
namespace {

using Clock = std::chrono::steady_clock;

// waitpid with a time limit; kills (SIGKILL) and reaps the child when it is exceeded. Returns the wait status,
// or -1 when the child had to be killed.
int WaitWithTimeout(pid_t pid, std::chrono::milliseconds budget) {
  auto deadline = Clock::now() + budget;
  int status = 0;
  while (Clock::now() < deadline) {
    if (waitpid(pid, &status, WNOHANG) == pid) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;
}

}  // namespace

std::unique_ptr<TgtTarget> TgtTarget::Start(const TgtTargetOptions& options, std::string* why_not) {
  std::unique_ptr<TgtTarget> target(new TgtTarget(options));
  auto tgtd = common::FindSystemProgram("tgtd");
  auto tgtadm = common::FindSystemProgram("tgtadm");
  if (!tgtd.ok() || !tgtadm.ok()) {
    *why_not = "tgtd/tgtadm (Debian package tgt) are not installed";
    return nullptr;
  }
  if (geteuid() != 0) {
    *why_not = "tgtd needs root";
    return nullptr;
  }
  target->tgtd_ = *tgtd;
  target->tgtadm_ = *tgtadm;
  try {
    target->temp_ = std::make_unique<testing::TempDir>();
  } catch (const std::exception& e) {
    *why_not = e.what();
    return nullptr;
  }
  target->dir_ = target->temp_->path();
  target->run_dir_ = target->dir_ + "/run";
  std::filesystem::create_directory(target->run_dir_);
  for (const char* path : {"/run", "/var/run"}) {
    char real[PATH_MAX];
    if (realpath(path, real) == nullptr) continue;
    bool seen = false;
    for (const auto& b : target->bind_points_) seen = seen || b == real;
    if (!seen) target->bind_points_.push_back(real);
  }
  if (!target->Launch(why_not) || !target->Configure(why_not)) return nullptr;  // the destructor cleans up
  return target;
}

pid_t TgtTarget::SpawnWithPrivateRun(const std::vector<std::string>& args, int out_fd) const {
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid != 0) return pid;
  // Child: nothing but async-signal-safe calls from here on.
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // must not outlive a crashed test binary
  if (getppid() != parent) _exit(127);
  if (unshare(CLONE_NEWNS) != 0 || mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) _exit(126);
  for (const auto& point : bind_points_) {
    if (mount(run_dir_.c_str(), point.c_str(), nullptr, MS_BIND, nullptr) != 0) _exit(125);
  }
  int null_fd = open("/dev/null", O_RDONLY);
  dup2(null_fd, STDIN_FILENO);
  dup2(out_fd, STDOUT_FILENO);
  dup2(out_fd, STDERR_FILENO);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execv(argv[0], argv.data());
  _exit(127);
}

bool TgtTarget::Launch(std::string* why_not) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    port_ = options_.port != 0 ? options_.port : FreeLoopbackPort(options_.address);
    if (port_ == 0) {
      *why_not = "no free loopback port";
      return false;
    }
    std::string log_path = dir_ + "/tgtd.log";
    int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (log_fd < 0) {
      *why_not = "cannot create " + log_path;
      return false;
    }
    pid_ = SpawnWithPrivateRun({tgtd_, "-f", "--iscsi", "portal=" + options_.address + ":" + std::to_string(port_)},
                               log_fd);
    close(log_fd);
    if (pid_ < 0) {
      *why_not = std::string("fork: ") + std::strerror(errno);
      return false;
    }
    // Ready when the control socket answers and the portal accepts connections.
    auto deadline = Clock::now() + std::chrono::seconds(10);
    while (Clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;  // it died (e.g. the port was taken meanwhile): try another port
        break;
      }
      std::string ignored;
      if (Listening(options_.address, port_) && Tgtadm({"--mode", "sys", "--op", "show"}, &ignored)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (pid_ > 0) {
      *why_not = "tgtd did not come up within 10 s: " + Log();
      return false;
    }
    if (options_.port != 0) break;
  }
  *why_not = "tgtd failed to start: " + Log();
  return false;
}

bool TgtTarget::Configure(std::string* why_not) {
  int tid = 0;
  for (const auto& iqn : options_.iqns) {
    ++tid;
    std::string tid_s = std::to_string(tid);
    if (!Tgtadm({"--lld", "iscsi", "--mode", "target", "--op", "new", "--tid", tid_s, "--targetname", iqn}, why_not)) {
      return false;
    }
    if (options_.with_luns) {
      std::string backing = dir_ + "/lun" + tid_s + ".img";
      int fd = open(backing.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      if (fd < 0 || ftruncate(fd, static_cast<off_t>(options_.lun_size_bytes)) != 0) {
        if (fd >= 0) close(fd);
        *why_not = "cannot create the LUN backing file " + backing;
        return false;
      }
      close(fd);
      if (!Tgtadm({"--lld", "iscsi", "--mode", "logicalunit", "--op", "new", "--tid", tid_s, "--lun", "1",
                   "--backing-store", backing},
                  why_not)) {
        return false;
      }
    }
    if (!Tgtadm({"--lld", "iscsi", "--mode", "target", "--op", "bind", "--tid", tid_s, "--initiator-address", "ALL"},
                why_not)) {
      return false;
    }
    // tgtadm takes account passwords in its argv; this is the test target's own configuration, not the proxy.
    if (!options_.chap_username.empty()) {
      if ((tid == 1 && !Tgtadm({"--lld", "iscsi", "--mode", "account", "--op", "new", "--user", options_.chap_username,
                                "--password", options_.chap_secret},
                               why_not)) ||
          !Tgtadm(
              {"--lld", "iscsi", "--mode", "account", "--op", "bind", "--tid", tid_s, "--user", options_.chap_username},
              why_not)) {
        return false;
      }
    }
    if (!options_.mutual_chap_username.empty()) {
      if ((tid == 1 && !Tgtadm({"--lld", "iscsi", "--mode", "account", "--op", "new", "--user",
                                options_.mutual_chap_username, "--password", options_.mutual_chap_secret},
                               why_not)) ||
          !Tgtadm({"--lld", "iscsi", "--mode", "account", "--op", "bind", "--tid", tid_s, "--user",
                   options_.mutual_chap_username, "--outgoing"},
                  why_not)) {
        return false;
      }
    }
  }
  return true;
}

bool TgtTarget::Tgtadm(const std::vector<std::string>& args, std::string* why_not) const {
  std::vector<std::string> argv = {tgtadm_};
  argv.insert(argv.end(), args.begin(), args.end());
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    *why_not = std::string("pipe: ") + std::strerror(errno);
    return false;
  }
  pid_t pid = SpawnWithPrivateRun(argv, pipe_fds[1]);
  close(pipe_fds[1]);
  if (pid < 0) {
    close(pipe_fds[0]);
    *why_not = std::string("fork: ") + std::strerror(errno);
    return false;
  }
  std::string output;
  char buf[4096];
  auto deadline = Clock::now() + std::chrono::seconds(10);
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) break;
    pollfd pfd{pipe_fds[0], POLLIN, 0};
    if (poll(&pfd, 1, static_cast<int>(left)) <= 0) continue;
    ssize_t n = read(pipe_fds[0], buf, sizeof buf);
    if (n <= 0) break;
    output.append(buf, static_cast<size_t>(n));
  }
  close(pipe_fds[0]);
  int status = WaitWithTimeout(pid, std::chrono::seconds(5));
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    *why_not = "tgtadm";
    for (const auto& a : args) *why_not += " " + a;
    *why_not += " failed (status " + std::to_string(status) + "): " + output;
    return false;
  }
  return true;
}

std::string TgtTarget::Log() const {
  std::ifstream in(dir_ + "/tgtd.log");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void TgtTarget::Stop() {
  if (pid_ <= 0) return;
  // tgtd ignores SIGTERM and does not exit while it has targets: delete them, then ask it to shut down.
  std::string ignored;
  for (size_t tid = 1; tid <= options_.iqns.size(); ++tid) {
    Tgtadm({"--lld", "iscsi", "--mode", "target", "--op", "delete", "--force", "--tid", std::to_string(tid)}, &ignored);
  }
  Tgtadm({"--mode", "sys", "--op", "delete"}, &ignored);
  WaitWithTimeout(pid_, std::chrono::seconds(5));
  pid_ = -1;
}

TgtTarget::~TgtTarget() {
  Stop();
  temp_.reset();
}

}  // namespace csi_proxy::test_support

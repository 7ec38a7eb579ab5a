// A private tgtd on loopback for tests; see tgt_target.h.
#include "tgt_target.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "run_program.h"

namespace csi_proxy::test_support {
namespace {

constexpr const char* kRunDir = "/var/run/tgtd";

bool Exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

uint16_t FreeLoopbackPort(const std::string& address) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  inet_pton(AF_INET, address.c_str(), &sa.sin_addr);
  socklen_t len = sizeof sa;
  uint16_t port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0) {
    port = ntohs(sa.sin_port);
  }
  close(fd);
  return port;
}

bool Listening(const std::string& address, uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  inet_pton(AF_INET, address.c_str(), &sa.sin_addr);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
  close(fd);
  return ok;
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
  char tmpl[] = "/tmp/csi-proxy-tgt-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    *why_not = std::string("mkdtemp: ") + std::strerror(errno);
    return nullptr;
  }
  target->dir_ = tmpl;
  if (!target->Launch(why_not) || !target->Configure(why_not)) return nullptr;  // the destructor cleans up
  return target;
}

bool TgtTarget::Launch(std::string* why_not) {
  created_run_dir_ = !Exists(kRunDir);
  for (int attempt = 0; attempt < 8; ++attempt) {
    // A control number no other tgtd uses: tgtd names its socket /var/run/tgtd/socket.<n>.
    control_port_ = 20000 + static_cast<int>((getpid() * 7919u + static_cast<unsigned>(attempt) * 104729u) % 40000u);
    std::string socket_path = std::string(kRunDir) + "/socket." + std::to_string(control_port_);
    if (Exists(socket_path) || Exists(socket_path + ".lock")) continue;
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
    std::vector<std::string> args = {tgtd_, "-f", "-C", std::to_string(control_port_), "--iscsi",
                                     "portal=" + options_.address + ":" + std::to_string(port_)};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
      close(log_fd);
      *why_not = std::string("fork: ") + std::strerror(errno);
      return false;
    }
    if (pid == 0) {
      // The target must not outlive a crashed test binary.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      int null_fd = open("/dev/null", O_RDONLY);
      dup2(null_fd, STDIN_FILENO);
      dup2(log_fd, STDOUT_FILENO);
      dup2(log_fd, STDERR_FILENO);
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(log_fd);
    pid_ = pid;
    // Ready when the control socket answers and the portal accepts connections.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        // It died (e.g. the port was taken meanwhile). The socket files of this number were not there before
        // this attempt, so they are ours to remove; then try another number.
        pid_ = -1;
        unlink(socket_path.c_str());
        unlink((socket_path + ".lock").c_str());
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
  }
  *why_not = "tgtd failed to start: " + Log();
  return false;
}

bool TgtTarget::Configure(std::string* why_not) {
  int tid = 0;
  for (const auto& iqn : options_.iqns) {
    ++tid;
    std::string tid_s = std::to_string(tid);
    std::string backing = dir_ + "/lun" + tid_s + ".img";
    int fd = open(backing.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(options_.lun_size_bytes)) != 0) {
      if (fd >= 0) close(fd);
      *why_not = "cannot create the LUN backing file " + backing;
      return false;
    }
    close(fd);
    if (!Tgtadm({"--lld", "iscsi", "--mode", "target", "--op", "new", "--tid", tid_s, "--targetname", iqn}, why_not) ||
        !Tgtadm({"--lld", "iscsi", "--mode", "logicalunit", "--op", "new", "--tid", tid_s, "--lun", "1",
                 "--backing-store", backing},
                why_not) ||
        !Tgtadm({"--lld", "iscsi", "--mode", "target", "--op", "bind", "--tid", tid_s, "--initiator-address", "ALL"},
                why_not)) {
      return false;
    }
    // tgtadm takes account passwords in its argv; this is the test target's own configuration, not the proxy.
    if (!options_.chap_username.empty()) {
      if ((tid == 1 && !Tgtadm({"--lld", "iscsi", "--mode", "account", "--op", "new", "--user", options_.chap_username,
                                "--password", options_.chap_secret},
                               why_not)) ||
          !Tgtadm({"--lld", "iscsi", "--mode", "account", "--op", "bind", "--tid", tid_s, "--user",
                   options_.chap_username},
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
  std::vector<std::string> argv = {tgtadm_, "-C", std::to_string(control_port_)};
  argv.insert(argv.end(), args.begin(), args.end());
  common::ProgramOptions options;
  options.timeout = std::chrono::seconds(10);
  auto result = common::RunProgram(argv, options);
  if (!result.ok()) {
    *why_not = "tgtadm: " + result.status().message();
    return false;
  }
  if (result->exit_code != 0) {
    *why_not = "tgtadm " + args[0] + " " + (args.size() > 3 ? args[3] : "") + " failed: " + result->output;
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
  if (pid_ > 0) {
    // tgtd ignores SIGTERM and does not exit while it has targets: delete them, then ask it to shut down.
    std::string ignored;
    for (size_t tid = 1; tid <= options_.iqns.size(); ++tid) {
      Tgtadm({"--lld", "iscsi", "--mode", "target", "--op", "delete", "--force", "--tid", std::to_string(tid)},
             &ignored);
    }
    Tgtadm({"--mode", "sys", "--op", "delete"}, &ignored);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    int status = 0;
    bool gone = false;
    while (std::chrono::steady_clock::now() < deadline) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        gone = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!gone) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
    }
    pid_ = -1;
  }
  if (control_port_ != 0) {
    std::string socket_path = std::string(kRunDir) + "/socket." + std::to_string(control_port_);
    unlink(socket_path.c_str());
    unlink((socket_path + ".lock").c_str());
    if (created_run_dir_) rmdir(kRunDir);  // only if empty: another test's tgtd may still use it
  }
}

TgtTarget::~TgtTarget() {
  Stop();
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

}  // namespace csi_proxy::test_support

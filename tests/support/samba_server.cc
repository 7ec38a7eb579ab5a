// A private smbd on loopback for tests; see samba_server.h.
#include "samba_server.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "loopback_port.h"
#include "run_program.h"

namespace csi_proxy::test_support {
namespace {

bool WaitGone(pid_t pgid, std::chrono::milliseconds budget) {
  auto deadline = std::chrono::steady_clock::now() + budget;
  while (std::chrono::steady_clock::now() < deadline) {
    if (kill(-pgid, 0) != 0 && errno == ESRCH) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

}  // namespace

std::unique_ptr<SambaServer> SambaServer::Start(const SambaServerOptions& options, std::string* why_not) {
  std::unique_ptr<SambaServer> server(new SambaServer(options));
  auto smbd = common::FindSystemProgram("smbd");
  auto smbpasswd = common::FindSystemProgram("smbpasswd");
  auto smbclient = common::FindSystemProgram("smbclient");
  if (!smbd.ok() || !smbpasswd.ok() || !smbclient.ok()) {
    *why_not = "smbd, smbpasswd and smbclient (Debian packages samba, smbclient) are needed";
    return nullptr;
  }
  if (geteuid() != 0) {
    *why_not = "smbd needs root";
    return nullptr;
  }
  server->smbd_ = *smbd;
  server->smbclient_ = *smbclient;
  try {
    server->temp_ = std::make_unique<testing::TempDir>();
  } catch (const std::exception& e) {
    *why_not = e.what();
    return nullptr;
  }
  const std::string dir = server->temp_->path();
  server->dir_ = dir;
  server->share_dir_ = dir + "/share";
  server->config_ = dir + "/smb.conf";
  for (const char* sub : {"share", "private", "lock", "state", "cache", "pid", "ncalrpc", "log"}) {
    std::filesystem::create_directory(dir + "/" + sub);
  }
  server->port_ = FreeLoopbackPort();
  if (server->port_ == 0) {
    *why_not = "no free loopback port";
    return nullptr;
  }

  // Everything smbd writes stays below `dir`; nothing reads or writes the system's samba directories.
  std::ofstream conf(server->config_);
  conf << "[global]\n"
       << "  server role = standalone server\n"
       << "  workgroup = CSITEST\n"
       << "  netbios name = CSITEST\n"
       << "  interfaces = 127.0.0.1\n"
       << "  bind interfaces only = yes\n"
       << "  smb ports = " << server->port_ << "\n"
       << "  disable netbios = yes\n"
       << "  private dir = " << dir << "/private\n"
       << "  lock directory = " << dir << "/lock\n"
       << "  state directory = " << dir << "/state\n"
       << "  cache directory = " << dir << "/cache\n"
       << "  pid directory = " << dir << "/pid\n"
       << "  ncalrpc dir = " << dir << "/ncalrpc\n"
       << "  log file = " << dir << "/log/smbd.log\n"
       << "  passdb backend = tdbsam:" << dir << "/private/passdb.tdb\n"
       << "  username map = " << dir << "/usermap\n"
       << "  load printers = no\n"
       << "  printing = bsd\n"
       << "  printcap name = /dev/null\n"
       << "  disable spoolss = yes\n"
       << "  server min protocol = SMB2_10\n"
       << "  server smb encrypt = " << (options.require_encryption ? "required" : "desired") << "\n"
       << "[" << options.share_name << "]\n"
       << "  path = " << server->share_dir_ << "\n"
       << "  read only = no\n"
       << "  valid users = root\n";
  conf.close();
  // The test user authenticates as itself and works as root inside the share; no system account is needed.
  std::ofstream(dir + "/usermap") << "root = " << options.username << "\n";

  common::ProgramOptions passwd;
  passwd.stdin_data = options.password + "\n" + options.password + "\n";
  auto added = common::RunProgram({*smbpasswd, "-c", server->config_, "-a", "-s", "root"}, passwd);
  if (!added.ok() || added->exit_code != 0) {
    *why_not = "smbpasswd failed: " + (added.ok() ? added->output : added.status().message());
    return nullptr;
  }
  if (!server->Launch(why_not)) return nullptr;
  return server;
}

bool SambaServer::Launch(std::string* why_not) {
  std::string log_path = dir_ + "/smbd.out";
  int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log_fd < 0) {
    *why_not = "cannot create " + log_path;
    return false;
  }
  std::vector<std::string> args = {
      smbd_, "--foreground", "--no-process-group", "--debug-stdout", "--debuglevel=1", "--configfile=" + config_};
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
    // Its own process group: smbd's helpers and per-connection children stay in it, so Stop can end exactly them.
    setpgid(0, 0);
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
  setpgid(pid, pid);  // also from this side, so the group exists before Stop could need it
  close(log_fd);
  pid_ = pid;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      *why_not = "smbd exited at start: " + Log();
      return false;
    }
    if (Listening("127.0.0.1", port_)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  *why_not = "smbd did not listen on port " + std::to_string(port_) + " within 20 s: " + Log();
  return false;
}

SambaServer::ClientResult SambaServer::Smbclient(const std::string& commands, const std::string& username,
                                                 const std::string& password) const {
  common::ProgramOptions options;
  options.timeout = std::chrono::seconds(30);
  options.extra_env.push_back("PASSWD=" + password);
  auto result = common::RunProgram({smbclient_, "//127.0.0.1/" + options_.share_name, "-p", std::to_string(port_), "-s",
                                    config_, "-U", username, "-c", commands},
                                   options);
  if (!result.ok()) return {-1, result.status().message()};
  return {result->exit_code, result->output};
}

std::string SambaServer::Log() const {
  std::ifstream in(dir_ + "/smbd.out");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void SambaServer::Stop() {
  if (pid_ <= 0) return;
  kill(-pid_, SIGTERM);
  int status = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  bool reaped = false;
  while (!reaped && std::chrono::steady_clock::now() < deadline) {
    reaped = waitpid(pid_, &status, WNOHANG) == pid_;
    if (!reaped) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!WaitGone(pid_, std::chrono::seconds(5))) kill(-pid_, SIGKILL);
  if (!reaped) waitpid(pid_, &status, 0);
  WaitGone(pid_, std::chrono::seconds(5));
  pid_ = -1;
}

SambaServer::~SambaServer() {
  Stop();
  temp_.reset();
}

}  // namespace csi_proxy::test_support

// See host_process.h.
#include "host_process.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace csi_proxy::testing {

namespace fs = std::filesystem;

bool SocketAccepts(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

HostProcess::HostProcess(std::string groups_toml, std::string host_keys, HostOptions options)
    : options_(std::move(options)) {
  if (options_.binary.empty()) options_.binary = HostBinary();
  fs::create_directories(endpoint_dir());
  fs::create_directories(kubelet_dir());
  WriteConfig(groups_toml, host_keys);
}

void HostProcess::WriteConfig(const std::string& groups_toml, const std::string& host_keys) {
  // Written beside and renamed over, as an admin's editor or a configuration manager does.
  std::string tmp = config_path() + ".new";
  std::ofstream cfg(tmp);
  cfg << "[host]\n";
  if (host_keys.find("endpoint_dir") == std::string::npos) cfg << "endpoint_dir = \"" << endpoint_dir() << "\"\n";
  if (options_.write_plugin_dir && host_keys.find("plugin_dir") == std::string::npos)
    cfg << "plugin_dir = \"" << PluginDir() << "\"\n";
  if (host_keys.find("kubelet_path") == std::string::npos) cfg << "kubelet_path = \"" << kubelet_dir() << "\"\n";
  if (host_keys.find("state_dir") == std::string::npos) cfg << "state_dir = \"" << dir() << "/state\"\n";
  if (host_keys.find("log_level") == std::string::npos) cfg << "log_level = \"debug\"\n";
  cfg << host_keys << "\n" << groups_toml << "\n";
  cfg.close();
  fs::rename(tmp, config_path());
}

bool HostProcess::Reload(std::chrono::milliseconds timeout) {
  auto count = [this] {
    std::string text = log();
    size_t n = 0;
    for (const char* marker : {"reload finished", "reload refused"}) {
      for (size_t at = text.find(marker); at != std::string::npos; at = text.find(marker, at + 1)) ++n;
    }
    return n;
  };
  size_t before = count();
  if (!running() || kill(pid(), SIGHUP) != 0) return false;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (count() > before) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

HostProcess::~HostProcess() = default;  // the ChildProcess kills a host still running

bool HostProcess::Spawn(const std::vector<std::string>& extra_args) {
  std::vector<std::string> argv = options_.launcher;
  for (const auto& a : {options_.binary, std::string("--config"), config_path()}) argv.push_back(a);
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  auto child = ChildProcess::Start(argv, log_path());
  if (!child.ok()) {
    error_ = "cannot start " + argv[0] + ": " + child.status().message();
    return false;
  }
  process_ = std::move(*child);
  return true;
}

bool HostProcess::Exited(int* exit_code) {
  int status = 0;
  if (!process_.running() || !process_.Exited(&status)) return false;
  if (exit_code != nullptr) *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return true;
}

bool HostProcess::Start(const std::vector<std::string>& expect_endpoints, std::chrono::milliseconds timeout) {
  if (!Spawn({})) return false;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (int code = 0; Exited(&code)) {
      error_ = "the host exited during start-up (exit code " + std::to_string(code) + "):\n" + log();
      return false;
    }
    bool all = true;
    for (const auto& e : expect_endpoints) all = all && SocketAccepts(endpoint(e));
    if (all) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  error_ = "the host did not serve every expected endpoint in time:\n" + log();
  return false;
}

int HostProcess::RunToExit(const std::vector<std::string>& extra_args, std::chrono::milliseconds timeout) {
  if (!Spawn(extra_args)) return -1;
  return Wait(timeout);
}

int HostProcess::Wait(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (int code = 0; Exited(&code)) return code;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return -1;
}

int HostProcess::Stop(std::chrono::milliseconds timeout) {
  if (!running()) return -1;
  kill(pid(), SIGTERM);
  return Wait(timeout);
}

void HostProcess::Kill() { process_.Kill(); }

std::string HostProcess::log() const {
  std::ifstream in(dir() + "/host.log");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace csi_proxy::testing

// See bench_host.h.
#include "bench_host.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "raw_client.h"

namespace csi_proxy::bench {
namespace fs = std::filesystem;

std::string BuildDir() { return CSI_PROXY_BUILD_DIR; }
std::string SourceDir() { return CSI_PROXY_SOURCE_DIR; }
std::string HostBinary() { return BuildDir() + "/bin/csi-proxy"; }
std::string PluginDir() { return BuildDir() + "/lib/csi-proxy/plugins"; }

std::string GroupLibrary(const std::string& group) {
  std::string path = PluginDir() + "/libcsi-proxy-" + group + ".so";
  return fs::exists(path) ? path : std::string();
}

std::string RepoRelative(const std::string& path) {
  std::string root = SourceDir() + "/";
  return path.rfind(root, 0) == 0 ? path.substr(root.size()) : path;
}

const std::vector<std::string>& AllGroups() {
  static const std::vector<std::string> groups = {"filesystem", "disk", "volume", "smb", "system", "iscsi"};
  return groups;
}

namespace {

// Watches one endpoint during start-up: connects as soon as the socket accepts, sends the HTTP/2 client preface
// and waits for the server's first frame (its SETTINGS). A gRPC server sends that as soon as it has taken the
// connection, so it marks the moment the endpoint serves, without the cost of a gRPC channel per attempt (which
// would be counted in the start-up time; a channel takes milliseconds to set up).
class Http2Probe {
 public:
  explicit Http2Probe(std::string path) : path_(std::move(path)) {}
  ~Http2Probe() { Close(); }
  Http2Probe(const Http2Probe&) = delete;
  Http2Probe& operator=(const Http2Probe&) = delete;

  bool ready() const { return ready_; }
  int fd() const { return fd_; }

  // Tries to connect (if not connected) and to read the server's frame header. Never blocks.
  void Advance() {
    if (ready_) return;
    if (fd_ < 0 && !Connect()) return;
    char buf[256];
    for (;;) {
      ssize_t n = recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) {
        received_.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n == 0) Close();  // the server dropped the connection: try again
      break;
    }
    // A frame header is 9 bytes: length (3), type (1, SETTINGS = 4), flags, stream id.
    if (received_.size() >= 9 && static_cast<uint8_t>(received_[3]) == 4) {
      ready_ = true;
      Close();
    }
  }

 private:
  bool Connect() {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof addr.sun_path - 1);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      close(fd);
      return false;
    }
    // The client connection preface and an empty SETTINGS frame.
    static const char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";
    if (send(fd, kPreface, sizeof kPreface - 1, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof kPreface - 1)) {
      close(fd);
      return false;
    }
    fd_ = fd;
    received_.clear();
    return true;
  }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

  std::string path_;
  int fd_ = -1;
  bool ready_ = false;
  std::string received_;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

BenchHost::BenchHost(const std::vector<std::string>& groups, const std::string& host_keys,
                     const std::string& extra_toml)
    : scratch_("csi-proxy-bench-host"), groups_(groups), host_keys_(host_keys) {
  scratch_.MakeDir("endpoints");
  scratch_.MakeDir("kubelet");
  scratch_.MakeDir("state");
  config_path_ = scratch_.Sub("csi-proxy.toml");
  std::ofstream(config_path_) << ConfigText(extra_toml);
}

std::string BenchHost::ConfigText(const std::string& extra_toml) const {
  std::ostringstream cfg;
  cfg << "[host]\n"
      << "endpoint_dir = \"" << scratch_.Sub("endpoints") << "\"\n"
      << "plugin_dir = \"" << PluginDir() << "\"\n"
      << "kubelet_path = \"" << kubelet_dir() << "\"\n"
      << "state_dir = \"" << scratch_.Sub("state") << "\"\n"
      << "shutdown_timeout_seconds = 5\n";
  if (host_keys_.find("log_level") == std::string::npos) cfg << "log_level = \"info\"\n";
  cfg << host_keys_ << "\n";
  for (const auto& g : groups_) cfg << "\n[groups." << g << "]\nenabled = true\n";
  if (!extra_toml.empty()) cfg << "\n" << extra_toml << "\n";
  return cfg.str();
}

Status BenchHost::RewriteConfig(const std::string& extra_toml) {
  std::string next = config_path_ + ".next";
  {
    std::ofstream out(next, std::ios::trunc);
    out << ConfigText(extra_toml);
    out.flush();
    if (!out) return Internal("cannot write " + next);
  }
  if (std::rename(next.c_str(), config_path_.c_str()) != 0) {
    return Internal("cannot rename " + next + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

BenchHost::~BenchHost() {
  if (process_.running()) (void)Stop();
}

std::string BenchHost::log() const { return ReadFile(scratch_.Sub("host.log")); }

StatusOr<std::vector<EndpointInfo>> BenchHost::CheckConfig(std::vector<std::string>* refusals) {
  std::string out_path = scratch_.Sub("check-config.out");
  auto child = ChildProcess::Start({HostBinary(), "--check-config", "--config", config_path_}, out_path);
  if (!child.ok()) return child.status();
  int status = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!child->Exited(&status)) {
    if (std::chrono::steady_clock::now() > deadline) return Internal("csi-proxy --check-config did not finish");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // Lines: "GROUP VERSION ENDPOINT LIBRARY" then "<group> <version> <dir>/<endpoint> <library>", "refused: ...".
  std::istringstream lines(ReadFile(out_path));
  std::string line;
  std::vector<EndpointInfo> endpoints;
  while (std::getline(lines, line)) {
    if (line.rfind("refused: ", 0) == 0) {
      if (refusals != nullptr) refusals->push_back(line.substr(9));
      continue;
    }
    std::istringstream fields(line);
    std::string group, version, endpoint_path;
    if (!(fields >> group >> version >> endpoint_path) || group == "GROUP") continue;
    if (endpoint_path.rfind(scratch_.Sub("endpoints") + "/", 0) != 0) continue;  // a log line, not a row
    endpoints.push_back({fs::path(endpoint_path).filename().string(), group, version});
  }
  return endpoints;
}

StatusOr<std::chrono::nanoseconds> BenchHost::Start(const std::vector<std::string>& endpoints,
                                                    std::chrono::milliseconds timeout) {
  if (process_.running()) return FailedPrecondition("the host is already running");
  std::error_code ec;
  for (const auto& e : endpoints) fs::remove(endpoint(e), ec);  // a previous run's files are gone already
  auto started = std::chrono::steady_clock::now();
  auto child = ChildProcess::Start({HostBinary(), "--config", config_path_}, scratch_.Sub("host.log"));
  if (!child.ok()) return child.status();
  process_ = std::move(*child);
  ++runs_;
  auto deadline = started + timeout;
  std::vector<std::unique_ptr<Http2Probe>> probes;
  for (const auto& e : endpoints) probes.push_back(std::make_unique<Http2Probe>(endpoint(e)));
  std::chrono::steady_clock::time_point ready_at;
  for (;;) {
    size_t ready = 0;
    std::vector<pollfd> waiting;
    for (auto& p : probes) {
      p->Advance();
      if (p->ready()) {
        ++ready;
      } else if (p->fd() >= 0) {
        waiting.push_back({p->fd(), POLLIN, 0});
      }
    }
    if (ready == probes.size()) {
      ready_at = std::chrono::steady_clock::now();
      break;
    }
    int status = 0;
    if (process_.Exited(&status)) {
      return Internal("the host exited during start-up (status " + std::to_string(status) + "):\n" + log());
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return Internal("the host did not serve every endpoint within " + std::to_string(timeout.count()) + " ms:\n" +
                      log());
    }
    // Wake up when a connected endpoint answers; poll the sockets that do not accept yet every 100 us.
    if (poll(waiting.data(), waiting.size(), 0) == 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  // Outside the timing: every endpoint answers a real gRPC call (UNIMPLEMENTED for the probe method).
  for (const auto& e : endpoints) {
    if (!ServerAnswers(endpoint(e), std::chrono::seconds(5))) {
      return Internal("endpoint " + e + " speaks HTTP/2 but does not answer a gRPC call:\n" + log());
    }
  }
  return std::chrono::duration_cast<std::chrono::nanoseconds>(ready_at - started);
}

StatusOr<std::chrono::nanoseconds> BenchHost::Stop() {
  if (!process_.running()) return FailedPrecondition("the host is not running");
  auto started = std::chrono::steady_clock::now();
  int status = process_.Stop(std::chrono::seconds(15));
  auto elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - started);
  if (status == -1) return Internal("the host did not stop on SIGTERM and was killed");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Internal("the host stopped with status " + std::to_string(status) + ":\n" + log());
  }
  return elapsed;
}

}  // namespace csi_proxy::bench

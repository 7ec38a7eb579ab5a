// See bench_host.h.
#include "bench_host.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <sstream>
#include <thread>

#include "raw_client.h"

namespace csi_proxy::bench {
namespace fs = std::filesystem;
using testing::ServerAnswers;

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

}  // namespace

BenchHost::BenchHost(const std::vector<std::string>& groups, const std::string& host_keys,
                     const std::string& extra_toml, const std::string& binary)
    : groups_(groups),
      host_keys_((host_keys.find("log_level") == std::string::npos ? "log_level = \"info\"\n" : "") +
                 std::string(host_keys.find("shutdown_timeout_seconds") == std::string::npos
                                 ? "shutdown_timeout_seconds = 5\n"
                                 : "") +
                 host_keys),
      host_(GroupTables(extra_toml), host_keys_, testing::HostOptions{.binary = binary}) {}

BenchHost::~BenchHost() {
  if (host_.running()) (void)Stop();
}

std::string BenchHost::GroupTables(const std::string& extra_toml) const {
  std::ostringstream tables;
  for (const auto& g : groups_) tables << "\n[groups." << g << "]\nenabled = true\n";
  if (!extra_toml.empty()) tables << "\n" << extra_toml << "\n";
  return tables.str();
}

Status BenchHost::RewriteConfig(const std::string& extra_toml) {
  host_.WriteConfig(GroupTables(extra_toml), host_keys_);
  return Status::Ok();
}

StatusOr<std::vector<EndpointInfo>> BenchHost::CheckConfig(std::vector<std::string>* refusals) {
  const size_t before = host_.log().size();
  if (host_.RunToExit({"--check-config"}, std::chrono::seconds(30)) == -1) {
    return Internal("csi-proxy --check-config did not finish");
  }
  // Lines: "GROUP VERSION ENDPOINT LIBRARY" then "<group> <version> <dir>/<endpoint> <library>", "refused: ...".
  std::istringstream lines(host_.log().substr(before));
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
    if (endpoint_path.rfind(host_.endpoint_dir() + "/", 0) != 0) continue;  // a log line, not a row
    endpoints.push_back({fs::path(endpoint_path).filename().string(), group, version});
  }
  return endpoints;
}

StatusOr<std::chrono::nanoseconds> BenchHost::Start(const std::vector<std::string>& endpoints,
                                                    std::chrono::milliseconds timeout) {
  if (host_.running()) return FailedPrecondition("the host is already running");
  std::error_code ec;
  for (const auto& e : endpoints) fs::remove(endpoint(e), ec);  // a previous run's files are gone already
  auto started = std::chrono::steady_clock::now();
  if (!host_.Start({}, timeout)) return Internal(host_.error());  // started; this function waits for it below
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
    if (int code = 0; host_.Exited(&code)) {
      return Internal("the host exited during start-up (exit code " + std::to_string(code) + "):\n" + log());
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
  if (!host_.running()) return FailedPrecondition("the host is not running");
  auto started = std::chrono::steady_clock::now();
  int code = host_.Stop(std::chrono::seconds(15));
  auto elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - started);
  if (code == -1) {
    host_.Kill();
    return Internal("the host did not stop on SIGTERM and was killed");
  }
  if (code != 0) return Internal("the host stopped with exit code " + std::to_string(code) + ":\n" + log());
  return elapsed;
}

}  // namespace csi_proxy::bench

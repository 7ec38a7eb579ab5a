// Starts the real csi-proxy executable with a configuration written for the test (or the benchmark: bench/common's
// BenchHost runs it too), and stops it. Everything it creates (a temporary directory with the config, the
// endpoint directory and the log) is removed when the object goes away, and the process is killed if it is still
// running, also when a test fails or the program dies (the host is a ChildProcess).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "build_tree.h"
#include "child_process.h"
#include "temp_dir.h"

namespace csi_proxy::testing {

struct HostOptions {
  std::string binary;                 // default: HostBinary()
  bool write_plugin_dir = true;       // false: leave plugin_dir unset, so the host uses its default beside itself
  std::vector<std::string> launcher;  // run the host through this command (e.g. prlimit ... --), absolute path first
};

class HostProcess {
 public:
  // `groups_toml` holds the [groups.*] tables; `host_keys` extra lines for [host] (endpoint_dir, plugin_dir and
  // kubelet_path default to the test's own directories unless given there).
  explicit HostProcess(std::string groups_toml, std::string host_keys = "", HostOptions options = {});
  ~HostProcess();
  HostProcess(const HostProcess&) = delete;
  HostProcess& operator=(const HostProcess&) = delete;

  // Starts the host and waits until every endpoint in `expect_endpoints` accepts connections (or the process
  // exits, or `timeout` passes). Returns false with the reason in error(). With no endpoints it returns once the
  // process is started.
  bool Start(const std::vector<std::string>& expect_endpoints,
             std::chrono::milliseconds timeout = std::chrono::seconds(20));
  // Runs the host with extra arguments and waits for it to exit; returns the exit code.
  int RunToExit(const std::vector<std::string>& extra_args,
                std::chrono::milliseconds timeout = std::chrono::seconds(20));

  // Rewrites the configuration file (same defaults as the constructor), atomically.
  void WriteConfig(const std::string& groups_toml, const std::string& host_keys = "");
  // Sends SIGHUP and waits until the host logs the reload's outcome. False if it did not within `timeout`.
  bool Reload(std::chrono::milliseconds timeout = std::chrono::seconds(60));

  // Sends SIGTERM and waits; returns the exit code (or 128+signal). -1 if it did not stop within `timeout`.
  int Stop(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // Sends SIGKILL and waits (a crash, as far as the sockets are concerned).
  void Kill();
  bool running() const { return process_.running(); }
  pid_t pid() const { return process_.pid(); }
  // True once the host has exited (it is reaped then); `exit_code` gets its exit code, or 128+signal.
  bool Exited(int* exit_code = nullptr);

  const std::string& dir() const { return dir_.path(); }
  std::string endpoint_dir() const { return dir_.path() + "/endpoints"; }
  std::string kubelet_dir() const { return dir_.path() + "/kubelet"; }
  std::string config_path() const { return dir_.path() + "/csi-proxy.toml"; }
  std::string endpoint(const std::string& name) const { return endpoint_dir() + "/" + name; }
  std::string admin_socket() const { return endpoint_dir() + "-admin.sock"; }  // the host's default
  // Everything the host wrote to stdout and stderr so far, and the file it is in.
  std::string log() const;
  std::string log_path() const { return dir_.path() + "/host.log"; }
  const std::string& error() const { return error_; }

 private:
  bool Spawn(const std::vector<std::string>& extra_args);
  int Wait(std::chrono::milliseconds timeout);

  TempDir dir_;
  HostOptions options_;
  ChildProcess process_;
  std::string error_;
};

// True when a Unix socket at `path` accepts a connection.
bool SocketAccepts(const std::string& path);

}  // namespace csi_proxy::testing

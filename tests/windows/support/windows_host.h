// The real csi-proxy.exe for the Windows tests, as tests/support/host_process.h is for Linux's: a configuration
// in a directory of its own, the host started in a console of its own with its output in a log file, stopped as
// an admin stops a console host (Ctrl-C in its console, sent by send_ctrl_c.exe) and, whatever happens, ended by
// its process id. The
// groups' end-to-end tests use it with pipe_client.h.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "config/win32_windows.h"

namespace csi_proxy::testing {

// A directory under the temporary directory, removed with everything in it when the object goes.
class WindowsTempDir {
 public:
  WindowsTempDir();
  ~WindowsTempDir();
  WindowsTempDir(const WindowsTempDir&) = delete;
  WindowsTempDir& operator=(const WindowsTempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The build tree's files, as the tests see them under Wine (drive Z:).
std::string BuildPath(const std::string& relative);  // "bin/csi-proxy.exe"
std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& text);
// `s` as a TOML literal string ('...'), which keeps Windows paths' backslashes as they are.
std::string TomlPath(const std::string& s);

// A program run to its end: its exit code and what it wrote (standard output and error together).
struct ProgramRun {
  int exit_code = -1;  // -1: it did not end in time (it was then ended)
  std::string output;
};
ProgramRun RunProgram(const std::string& program, const std::vector<std::string>& args,
                      std::chrono::milliseconds timeout = std::chrono::seconds(60),
                      const std::vector<std::pair<std::string, std::string>>& environment = {});

class WindowsHost {
 public:
  // `groups_toml` are the [groups.<name>] tables; `host_keys` more lines of [host]. The [host] table also names
  // the directory's state\ and, unless host_keys set them, its kubelet\ as kubelet_path, an audit log (audit.log)
  // and a short shutdown_timeout_seconds.
  explicit WindowsHost(std::string groups_toml, std::string host_keys = "");
  ~WindowsHost();  // Kill()
  WindowsHost(const WindowsHost&) = delete;
  WindowsHost& operator=(const WindowsHost&) = delete;

  // Starts csi-proxy.exe --config <dir>\csi-proxy.toml `extra_args` and waits until every pipe in
  // `expect_endpoints` (csi-proxy-<group>-<version>) and the admin pipe accept; false (with the log in error())
  // when the host exits or the time runs out.
  bool Start(const std::vector<std::string>& expect_endpoints, const std::vector<std::string>& extra_args = {},
             std::chrono::milliseconds timeout = std::chrono::seconds(60));
  // Runs csi-proxy.exe with the configuration and `extra_args` to its end (a refused start, --check-config).
  ProgramRun RunToExit(const std::vector<std::string>& extra_args,
                       std::chrono::milliseconds timeout = std::chrono::seconds(60)) const;
  // Ctrl-C in the host's console; its exit code, or -1 when it had to be ended.
  int Stop(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  void Kill();
  bool running() const;
  DWORD pid() const { return pid_; }

  const std::string& dir() const { return dir_.path(); }
  std::string config_path() const { return dir() + "\\csi-proxy.toml"; }
  std::string audit_path() const { return dir() + "\\audit.log"; }
  std::string log_path() const { return dir() + "\\host.log"; }
  std::string log() const { return ReadFile(log_path()); }
  const std::string& error() const { return error_; }

 private:
  WindowsTempDir dir_;
  host::UniqueHandle process_;
  DWORD pid_ = 0;
  std::string error_;
};

// Whether a server has the pipe \\.\pipe\<name> (without connecting to it).
bool PipeExists(const std::string& name);

}  // namespace csi_proxy::testing

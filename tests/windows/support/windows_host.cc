// See windows_host.h.
#include "windows_host.h"

#include <algorithm>
#include <atomic>
#include <cwchar>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "named_pipe_listener_windows.h"

namespace csi_proxy::testing {
namespace {

using host::Narrow;
using host::UniqueHandle;
using host::Widen;

// A handle of `path` that a child may write its output to (inheritable, shared, appended to).
UniqueHandle OutputFile(const std::string& path) {
  SECURITY_ATTRIBUTES inherit{sizeof inherit, nullptr, TRUE};
  return UniqueHandle(CreateFileW(Widen(path).c_str(), FILE_APPEND_DATA, FILE_SHARE_READ | FILE_SHARE_WRITE, &inherit,
                                  OPEN_ALWAYS, FILE_ATTRIBUTE_NORMAL, nullptr));
}

// Starts `program` with `args`, its output appended to `output_path`; in a console of its own when `new_console`
// (so that a Ctrl-C can be sent to it alone). The environment gets `environment` on top of this process's.
UniqueHandle Spawn(const std::string& program, const std::vector<std::string>& args, const std::string& output_path,
                   bool new_console, const std::vector<std::pair<std::string, std::string>>& environment, DWORD* pid) {
  std::wstring command = host::QuoteArgument(Widen(program));
  for (const auto& arg : args) command += L" " + host::QuoteArgument(Widen(arg));
  UniqueHandle output = OutputFile(output_path);
  SECURITY_ATTRIBUTES inherit{sizeof inherit, nullptr, TRUE};
  UniqueHandle input(
      CreateFileW(L"NUL", GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE, &inherit, OPEN_EXISTING, 0, nullptr));
  STARTUPINFOW startup{};
  startup.cb = sizeof startup;
  startup.dwFlags = STARTF_USESTDHANDLES;
  startup.hStdInput = input.get();
  startup.hStdOutput = output.get();
  startup.hStdError = output.get();
  // A new environment block: this process's, with `environment` set over it.
  std::wstring block;
  if (!environment.empty()) {
    wchar_t* current = GetEnvironmentStringsW();
    for (const wchar_t* p = current; *p != 0; p += wcslen(p) + 1) {
      std::wstring entry(p);
      bool replaced = false;
      for (const auto& [name, value] : environment) replaced |= entry.rfind(Widen(name) + L"=", 0) == 0;
      if (!replaced) block += entry + L'\0';
    }
    FreeEnvironmentStringsW(current);
    for (const auto& [name, value] : environment) block += Widen(name) + L"=" + Widen(value) + L'\0';
    block += L'\0';
  }
  PROCESS_INFORMATION info{};
  DWORD flags = (new_console ? CREATE_NEW_CONSOLE : 0) | CREATE_UNICODE_ENVIRONMENT;
  if (!CreateProcessW(Widen(program).c_str(), command.data(), nullptr, nullptr, TRUE, flags,
                      block.empty() ? nullptr : block.data(), nullptr, &startup, &info)) {
    return UniqueHandle();
  }
  CloseHandle(info.hThread);
  *pid = info.dwProcessId;
  return UniqueHandle(info.hProcess);
}

// Ctrl-C in the console of `process`, the way an admin stops a console host, and waits up to `timeout` for it to
// end: through send_ctrl_c.exe, which joins that console for the moment.
bool SendCtrlCAndWait(HANDLE process, DWORD pid, std::chrono::milliseconds timeout) {
  ProgramRun sent = RunProgram(BuildPath("bin/send_ctrl_c.exe"), {std::to_string(pid), std::to_string(timeout.count())},
                               timeout + std::chrono::seconds(10));
  return sent.exit_code == 0 && WaitForSingleObject(process, 0) == WAIT_OBJECT_0;
}

}  // namespace

WindowsTempDir::WindowsTempDir() {
  static std::atomic<int> counter{0};
  wchar_t temp[MAX_PATH + 1];
  GetTempPathW(MAX_PATH + 1, temp);
  for (;;) {
    std::wstring dir = std::wstring(temp) + L"csi-proxy-test-" + std::to_wstring(GetCurrentProcessId()) + L"-" +
                       std::to_wstring(counter.fetch_add(1));
    if (CreateDirectoryW(dir.c_str(), nullptr)) {
      path_ = Narrow(dir);
      return;
    }
  }
}

WindowsTempDir::~WindowsTempDir() {
  std::error_code ec;
  std::filesystem::remove_all(std::filesystem::path(Widen(path_)), ec);
}

std::string BuildPath(const std::string& relative) { return std::string(CSI_PROXY_BUILD_DIR) + "/" + relative; }

std::string ReadFile(const std::string& path) {
  std::ifstream in(std::filesystem::path(Widen(path)), std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(std::filesystem::path(Widen(path)), std::ios::binary | std::ios::trunc);
  out << text;
}

std::string TomlPath(const std::string& s) { return "'" + s + "'"; }

ProgramRun RunProgram(const std::string& program, const std::vector<std::string>& args,
                      std::chrono::milliseconds timeout,
                      const std::vector<std::pair<std::string, std::string>>& environment) {
  WindowsTempDir scratch;
  std::string output_path = scratch.path() + "\\output.txt";
  ProgramRun run;
  DWORD pid = 0;
  UniqueHandle process = Spawn(program, args, output_path, false, environment, &pid);
  if (!process.valid()) {
    run.output = "cannot start " + program + ": " + host::ErrorText(GetLastError());
    return run;
  }
  if (WaitForSingleObject(process.get(), static_cast<DWORD>(timeout.count())) != WAIT_OBJECT_0) {
    TerminateProcess(process.get(), 99);
    WaitForSingleObject(process.get(), 10000);
  } else {
    DWORD code = 0;
    GetExitCodeProcess(process.get(), &code);
    run.exit_code = static_cast<int>(code);
  }
  run.output = ReadFile(output_path);
  return run;
}

bool PipeExists(const std::string& name) {
  return WaitNamedPipeW(host::PipePath(name).c_str(), 1) || GetLastError() != ERROR_FILE_NOT_FOUND;
}

WindowsHost::WindowsHost(std::string groups_toml, std::string host_keys) {
  std::string keys = "state_dir = " + TomlPath(dir() + "\\state") + "\n";
  if (host_keys.find("kubelet_path") == std::string::npos) {
    CreateDirectoryW(Widen(dir() + "\\kubelet").c_str(), nullptr);
    keys += "kubelet_path = " + TomlPath(dir() + "\\kubelet") + "\n";
  }
  if (host_keys.find("audit_log") == std::string::npos) keys += "audit_log = " + TomlPath(audit_path()) + "\n";
  if (host_keys.find("shutdown_timeout_seconds") == std::string::npos) keys += "shutdown_timeout_seconds = 10\n";
  WriteFile(config_path(), "[host]\n" + keys + host_keys + "\n" + groups_toml);
}

WindowsHost::~WindowsHost() { Kill(); }

bool WindowsHost::Start(const std::vector<std::string>& expect_endpoints, const std::vector<std::string>& extra_args,
                        std::chrono::milliseconds timeout) {
  std::vector<std::string> args = {"--config", config_path()};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  process_ = Spawn(BuildPath("bin/csi-proxy.exe"), args, log_path(), true, {}, &pid_);
  if (!process_.valid()) {
    error_ = "cannot start csi-proxy.exe: " + host::ErrorText(GetLastError());
    return false;
  }
  std::vector<std::string> pipes = expect_endpoints;
  pipes.push_back("csi-proxy-admin");
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (std::all_of(pipes.begin(), pipes.end(), PipeExists)) return true;
    if (!running() || std::chrono::steady_clock::now() > deadline) {
      error_ = std::string(running() ? "the pipes did not appear in time" : "the host exited") + "; its log:\n" + log();
      return false;
    }
    Sleep(50);
  }
}

ProgramRun WindowsHost::RunToExit(const std::vector<std::string>& extra_args, std::chrono::milliseconds timeout) const {
  std::vector<std::string> args = {"--config", config_path()};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  return RunProgram(BuildPath("bin/csi-proxy.exe"), args, timeout);
}

bool WindowsHost::running() const { return process_.valid() && WaitForSingleObject(process_.get(), 0) == WAIT_TIMEOUT; }

int WindowsHost::Stop(std::chrono::milliseconds timeout) {
  if (!process_.valid()) return -1;
  if (running() && !SendCtrlCAndWait(process_.get(), pid_, timeout)) {
    Kill();
    return -1;
  }
  DWORD code = 0;
  GetExitCodeProcess(process_.get(), &code);
  process_.reset();
  return static_cast<int>(code);
}

void WindowsHost::Kill() {
  if (!process_.valid()) return;
  if (running()) {
    TerminateProcess(process_.get(), 99);
    WaitForSingleObject(process_.get(), 10000);
  }
  process_.reset();
}

}  // namespace csi_proxy::testing

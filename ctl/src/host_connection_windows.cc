// See host_connection.h: named pipes through the project's pipe dialer (DialPipe: a gRPC channel over the pipe,
// relayed through a private loopback socket pair), and the host started as a child process.
#include <cstdio>

#include "config/win32_windows.h"
#include "host_connection.h"
#include "pipe_dialer_windows.h"

namespace csi_proxy::ctl {
namespace {

// The pipe's name of a path \\.\pipe\<name>; empty when `path` is not one.
std::string PipeName(const std::string& path) {
  const std::string prefix = R"(\\.\pipe\)";
  if (path.size() <= prefix.size() || _strnicmp(path.c_str(), prefix.c_str(), prefix.size()) != 0) return "";
  return path.substr(prefix.size());
}

}  // namespace

StatusOr<std::shared_ptr<grpc::Channel>> ConnectAdmin(const std::string& path) {
  std::string name = PipeName(path);
  if (name.empty()) return InvalidArgument(path + " is not a named pipe (\\\\.\\pipe\\<name>)");
  auto channel = host::DialPipe(name, std::chrono::seconds(5));
  if (channel.ok()) return channel;
  if (channel.status().code() == Code::kPermissionDenied) {
    return PermissionDenied("permission denied on the admin pipe " + path +
                            ": it is for SYSTEM and Administrators; run csi-proxyctl as an administrator");
  }
  return NotFound("no admin pipe at " + path + ": " + channel.status().message() +
                  " (is csi-proxy running? --admin-socket or --config name another host)");
}

StatusOr<std::shared_ptr<grpc::Channel>> ConnectEndpoint(const std::string& endpoint_dir, const std::string& name) {
  if (!PipeName(endpoint_dir + "\\" + name).empty()) return host::DialPipe(name, std::chrono::seconds(5));
  return InvalidArgument(endpoint_dir + " is not the pipe namespace \\\\.\\pipe");
}

StatusOr<int> RunHost(const std::string& executable_dir, const std::vector<std::string>& args) {
  std::wstring program = host::Widen(executable_dir) + L"\\csi-proxy.exe";
  std::wstring command = host::QuoteArgument(program);
  for (const std::string& arg : args) command += L" " + host::QuoteArgument(host::Widen(arg));
  // The host writes to our standard streams, wherever they go.
  STARTUPINFOW startup{};
  startup.cb = sizeof startup;
  startup.dwFlags = STARTF_USESTDHANDLES;
  startup.hStdInput = GetStdHandle(STD_INPUT_HANDLE);
  startup.hStdOutput = GetStdHandle(STD_OUTPUT_HANDLE);
  startup.hStdError = GetStdHandle(STD_ERROR_HANDLE);
  for (HANDLE h : {startup.hStdInput, startup.hStdOutput, startup.hStdError}) {
    if (h != nullptr && h != INVALID_HANDLE_VALUE) SetHandleInformation(h, HANDLE_FLAG_INHERIT, HANDLE_FLAG_INHERIT);
  }
  std::fflush(stdout);
  PROCESS_INFORMATION process{};
  if (!CreateProcessW(program.c_str(), command.data(), nullptr, nullptr, TRUE, 0, nullptr, nullptr, &startup,
                      &process)) {
    return FailedPrecondition("cannot run " + host::Narrow(program) + ": " + host::ErrorText(GetLastError()));
  }
  host::UniqueHandle process_handle(process.hProcess);
  host::UniqueHandle thread_handle(process.hThread);
  WaitForSingleObject(process.hProcess, INFINITE);
  DWORD exit_code = 1;
  GetExitCodeProcess(process.hProcess, &exit_code);
  return static_cast<int>(exit_code);
}

}  // namespace csi_proxy::ctl

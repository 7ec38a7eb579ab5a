// See endpoint_socket.h: on Windows an endpoint is the named pipe \\.\pipe\<name>. Listen claims the name at once
// (NamedPipeListener::Open: its first instance and a named mutex, so a second host fails here, before anything is
// served); the accept loop starts accepting on it (listeners_windows.cc). The state directory's lock is a file
// opened without sharing.
#include "config/win32_windows.h"  // winsock2.h and windows.h, before the headers that need them

#include <sddl.h>

#include <cctype>

#include "config/default_paths.h"
#include "config/trusted_files.h"
#include "serving/endpoint_socket.h"
#include "serving/named_pipe_listener_windows.h"

namespace csi_proxy::host {
namespace {

constexpr std::string_view kPipeNamespace = R"(\\.\pipe)";

// "\\.\pipe" in any case and with either slash, with or without a last separator.
bool IsPipeNamespace(std::string_view dir) {
  while (!dir.empty() && (dir.back() == '\\' || dir.back() == '/')) dir.remove_suffix(1);
  if (dir.size() != kPipeNamespace.size()) return false;
  for (size_t i = 0; i < dir.size(); ++i) {
    char c = dir[i] == '/' ? '\\' : static_cast<char>(std::tolower(static_cast<unsigned char>(dir[i])));
    if (c != kPipeNamespace[i]) return false;
  }
  return true;
}

// The pipe name of an endpoint path \\.\pipe\<name>; empty when `path` is not one.
std::string PipeName(const std::string& path) {
  size_t slash = path.find_last_of("\\/");
  if (slash == std::string::npos || !IsPipeNamespace(std::string_view(path).substr(0, slash))) return "";
  return path.substr(slash + 1);
}

}  // namespace

StatusOr<SocketAccess> SocketAccessOf(const HostConfig& config) {
  SocketAccess access;
  access.sddl = config.pipe_sddl;
  return access;
}

// SYSTEM and Administrators: reload and status are theirs alone, whatever pipe_sddl lets drivers do.
SocketAccess AdminSocketAccess() {
  SocketAccess access;
  access.sddl = "D:P(A;;GA;;;SY)(A;;GA;;;BA)";
  return access;
}

StatusOr<std::unique_ptr<ListeningSocket>> ListeningSocket::Listen(const std::string& path,
                                                                   const SocketAccess& access) {
  std::string name = PipeName(path);
  if (name.empty()) {
    return InvalidArgument("cannot serve " + path + ": on Windows an endpoint is a named pipe \\\\.\\pipe\\<name>");
  }
  auto listener = NamedPipeListener::Open({name, access.sddl.empty() ? DefaultPipeSecurity() : access.sddl});
  if (!listener.ok()) {
    if (listener.status().code() == Code::kAlreadyExists) return FailedPrecondition(listener.status().message());
    return listener.status();
  }
  return std::unique_ptr<ListeningSocket>(new ListeningSocket(path, reinterpret_cast<intptr_t>(listener->release())));
}

void ListeningSocket::Close() {
  if (handle_ == -1) return;
  delete reinterpret_cast<NamedPipeListener*>(handle_);
  handle_ = -1;
}

Status RequireNotServed(const std::string& path) {
  std::string name = PipeName(path);
  if (name.empty()) return Status::Ok();
  // Another csi-proxy holds the name's mutex; another program may serve the pipe without it. WaitNamedPipe looks
  // without connecting: it fails at once with ERROR_FILE_NOT_FOUND when no such pipe exists.
  UniqueHandle guard(OpenMutexW(SYNCHRONIZE, FALSE, (L"Global\\csi-proxy-pipe-" + Widen(name)).c_str()));
  if (guard.valid() || WaitNamedPipeW(PipePath(name).c_str(), 1) || GetLastError() != ERROR_FILE_NOT_FOUND) {
    return FailedPrecondition("endpoint " + path + " is busy: another process is serving it");
  }
  return Status::Ok();
}

Status LockDirectory(const std::string& dir) {
  // Made for SYSTEM, Administrators and the host's account (users may read), not inheriting what the parent gives
  // others (ProgramData lets every user add entries): what 0755 is on Linux.
  PSECURITY_DESCRIPTOR descriptor = nullptr;
  if (!ConvertStringSecurityDescriptorToSecurityDescriptorW(
          L"D:P(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)(A;OICI;FA;;;OW)(A;OICI;0x1200a9;;;BU)", SDDL_REVISION_1, &descriptor,
          nullptr)) {
    return Internal("the state directory's security descriptor: " + ErrorText(GetLastError()));
  }
  SECURITY_ATTRIBUTES attributes{sizeof attributes, descriptor, FALSE};
  bool made = CreateDirectoryW(Widen(dir).c_str(), &attributes);
  DWORD error = GetLastError();
  LocalFree(descriptor);
  if (!made && error != ERROR_ALREADY_EXISTS) return Internal("cannot create " + dir + ": " + ErrorText(error));
  std::string path = dir + "\\.csi-proxy.lock";
  // No sharing: a second opener fails with a sharing violation for as long as this handle is open.
  UniqueHandle lock(CreateFileW(Widen(path).c_str(), GENERIC_READ | GENERIC_WRITE, 0, nullptr, OPEN_ALWAYS,
                                FILE_ATTRIBUTE_HIDDEN | FILE_FLAG_OPEN_REPARSE_POINT, nullptr));
  if (!lock.valid()) {
    DWORD error = GetLastError();
    if (error == ERROR_SHARING_VIOLATION)
      return FailedPrecondition("another csi-proxy uses the state directory " + dir);
    return Internal("cannot open " + path + ": " + ErrorText(error));
  }
  lock.release();  // stays open, and locked, until the process exits
  return Status::Ok();
}

Status CheckEndpointDirectory(const HostConfig& config) {
  CSI_PROXY_RETURN_IF_ERROR(CreateEndpointDirectory(config.endpoint_dir));
  return CheckTrustedDirectory(config.endpoint_dir, "endpoint_dir");
}

// The pipe namespace is always there: nothing to create, only a value to refuse.
Status CreateEndpointDirectory(const std::string& dir) {
  if (IsPipeNamespace(dir)) return Status::Ok();
  return InvalidArgument("endpoint_dir " + dir + ": on Windows the endpoints are named pipes, and endpoint_dir is " +
                         std::string(kPipeNamespace));
}

}  // namespace csi_proxy::host

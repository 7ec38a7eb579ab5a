// See pipe_client_identity_windows.h.
#include "pipe_client_identity_windows.h"

#include <sddl.h>

#include <memory>

namespace csi_proxy::host {
namespace {

uint64_t Ticks(const FILETIME& t) { return (static_cast<uint64_t>(t.dwHighDateTime) << 32) | t.dwLowDateTime; }

StatusOr<std::vector<unsigned char>> TokenInfo(HANDLE token, TOKEN_INFORMATION_CLASS what) {
  DWORD size = 0;
  GetTokenInformation(token, what, nullptr, 0, &size);
  if (size == 0) return Internal("GetTokenInformation: " + ErrorText(GetLastError()));
  std::vector<unsigned char> buffer(size);
  if (!GetTokenInformation(token, what, buffer.data(), size, &size)) {
    return Internal("GetTokenInformation: " + ErrorText(GetLastError()));
  }
  return buffer;
}

}  // namespace

uint64_t FileTimeNow() {
  FILETIME now;
  GetSystemTimeAsFileTime(&now);
  return Ticks(now);
}

StatusOr<PipeClientIdentity> IdentifyProcess(HANDLE process) {
  HANDLE raw_token = nullptr;
  if (!OpenProcessToken(process, TOKEN_QUERY, &raw_token)) {
    return PermissionDenied("OpenProcessToken: " + ErrorText(GetLastError()));
  }
  UniqueHandle token(raw_token);
  PipeClientIdentity id;
  id.pid = static_cast<int64_t>(GetProcessId(process));
  CSI_PROXY_ASSIGN_OR_RETURN(auto user, TokenInfo(token.get(), TokenUser));
  CSI_PROXY_ASSIGN_OR_RETURN(id.user_sid, SidText(reinterpret_cast<TOKEN_USER*>(user.data())->User.Sid));
  CSI_PROXY_ASSIGN_OR_RETURN(auto groups_buffer, TokenInfo(token.get(), TokenGroups));
  const auto* groups = reinterpret_cast<const TOKEN_GROUPS*>(groups_buffer.data());
  for (DWORD i = 0; i < groups->GroupCount; ++i) {
    DWORD attributes = groups->Groups[i].Attributes;
    // A deny-only group (e.g. Administrators in a UAC-filtered token) grants nothing, so it does not count here.
    if ((attributes & SE_GROUP_ENABLED) == 0 || (attributes & SE_GROUP_USE_FOR_DENY_ONLY) != 0) continue;
    CSI_PROXY_ASSIGN_OR_RETURN(auto sid, SidText(groups->Groups[i].Sid));
    id.group_sids.push_back(std::move(sid));
  }
  return id;
}

StatusOr<PipeClientIdentity> IdentifyPipeClient(HANDLE pipe, uint64_t connected_at) {
  ULONG pid = 0;
  if (!GetNamedPipeClientProcessId(pipe, &pid)) {
    return Internal("GetNamedPipeClientProcessId: " + ErrorText(GetLastError()));
  }
  UniqueHandle process(OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION | SYNCHRONIZE, FALSE, pid));
  if (!process.valid()) {
    return PermissionDenied("the pipe's client process " + std::to_string(pid) +
                            " cannot be opened: " + ErrorText(GetLastError()));
  }
  // Holding the process handle pins the process id; the process must also be the one that was there when the
  // client connected: still running, and created before the connection.
  FILETIME created, exited, kernel, user;
  if (!GetProcessTimes(process.get(), &created, &exited, &kernel, &user)) {
    return Internal("GetProcessTimes: " + ErrorText(GetLastError()));
  }
  if (WaitForSingleObject(process.get(), 0) != WAIT_TIMEOUT || Ticks(created) > connected_at) {
    return PermissionDenied("the pipe's client process " + std::to_string(pid) + " has ended");
  }
  return IdentifyProcess(process.get());
}

}  // namespace csi_proxy::host

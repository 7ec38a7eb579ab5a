// See pipe_client_identity_windows.h.
#include "pipe_client_identity_windows.h"

namespace csi_proxy::host {
namespace {

uint64_t Ticks(const FILETIME& t) { return (static_cast<uint64_t>(t.dwHighDateTime) << 32) | t.dwLowDateTime; }

}  // namespace

uint64_t FileTimeNow() {
  FILETIME now;
  GetSystemTimeAsFileTime(&now);
  return Ticks(now);
}

StatusOr<PipeClientIdentity> IdentifyProcess(HANDLE process) {
  CSI_PROXY_ASSIGN_OR_RETURN(TokenAccounts accounts, TokenAccountsOf(process));
  PipeClientIdentity id;
  id.pid = static_cast<int64_t>(GetProcessId(process));
  id.user_sid = std::move(accounts.user_sid);
  id.group_sids = std::move(accounts.group_sids);
  return id;
}

StatusOr<PipeClientIdentity> IdentifyPipeClient(HANDLE pipe, uint64_t connected_at, UniqueHandle* pinned) {
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
  auto identity = IdentifyProcess(process.get());
  if (identity.ok() && pinned != nullptr) *pinned = std::move(process);
  return identity;
}

}  // namespace csi_proxy::host

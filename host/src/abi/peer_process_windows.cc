// See peer_process.h: a handle of the pipe client's process holds its id (Windows does not reuse the id of a
// process while a handle to it is open), and its token says whom it runs as now.
#include "abi/peer_process.h"

#include "config/win32_windows.h"  // winsock2.h and windows.h, before the headers that need them

#include <algorithm>

namespace csi_proxy::host {

bool PeerProcess::Supported() { return true; }

std::shared_ptr<const PeerProcess> PeerProcess::Of(intptr_t socket) {
  HANDLE process = reinterpret_cast<HANDLE>(socket);
  if (process == nullptr || process == INVALID_HANDLE_VALUE) return nullptr;
  return std::shared_ptr<const PeerProcess>(new PeerProcess(socket));
}

PeerProcess::~PeerProcess() { CloseHandle(reinterpret_cast<HANDLE>(handle_)); }

std::optional<std::string> PeerProcess::Changed(const PeerCredentials& connected) const {
  const std::string who = "the process that connected (pid " + std::to_string(connected.pid) + ")";
  HANDLE process = reinterpret_cast<HANDLE>(handle_);
  auto now = TokenAccountsOf(process);
  if (WaitForSingleObject(process, 0) != WAIT_TIMEOUT || !now.ok()) {
    return who + " has exited: another process uses its connection";
  }
  if (now->user_sid != connected.user_sid) {
    return who + " now runs as user " + now->user_sid + "; it connected as user " + connected.user_sid;
  }
  std::vector<std::string> had = connected.group_sids, has = now->group_sids;
  std::sort(had.begin(), had.end());
  std::sort(has.begin(), has.end());
  if (had != has) return who + " now runs with other groups than it connected with";
  return std::nullopt;
}

}  // namespace csi_proxy::host

// Who is on the other end of a named-pipe connection: the client's process id (GetNamedPipeClientProcessId) and
// its access token's user and group SIDs, what uid and gids are on Linux. Read from the client process's own
// token, because upstream's Go clients (go-winio) dial at the anonymous impersonation level, which leaves the
// server nothing to impersonate; a process that ended (or a reused process id) is refused, never guessed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/win32_windows.h"
#include "csi_proxy/status.hpp"

namespace csi_proxy::host {

struct PipeClientIdentity {
  int64_t pid = -1;
  std::string user_sid;                 // e.g. "S-1-5-18" (LocalSystem)
  std::vector<std::string> group_sids;  // the token's enabled groups, e.g. "S-1-5-32-544" (BUILTIN\Administrators)
};

// Reads the identity of the client connected to `pipe`. `connected_at` (a FILETIME-style UTC tick count, as
// GetSystemTimeAsFileTime gives) is when the connection was accepted: a process created after it is not the client.
// With `pinned`, the client process's handle (SYNCHRONIZE and limited query rights) goes there: that process, not
// a later one of the same id.
StatusOr<PipeClientIdentity> IdentifyPipeClient(HANDLE pipe, uint64_t connected_at, UniqueHandle* pinned = nullptr);

// The identity of this process (the tests compare it with what the server read).
StatusOr<PipeClientIdentity> IdentifyProcess(HANDLE process);

// The current UTC time in 100 ns ticks since 1601, for IdentifyPipeClient's connected_at.
uint64_t FileTimeNow();

}  // namespace csi_proxy::host

// Endpoint socket files: refuse a live one, replace a stale one, create with the configured mode and group.
#pragma once

#include <sys/types.h>

#include <string>

#include "csi_proxy/status.hpp"

namespace csi_proxy::host {

// Binds and listens on `path`. A socket file that another process still accepts on is never taken over
// (FAILED_PRECONDITION naming it); one that refuses connections is a leftover of a crashed run and is replaced.
// Returns the listening fd (non-blocking, close-on-exec).
StatusOr<int> ListenUnixSocket(const std::string& path, uint32_t mode, gid_t group /* or -1 */);

// Fails with FAILED_PRECONDITION ("endpoint <path> is busy: another process is serving it") when a socket at
// `path` accepts connections; any other state (absent, stale, not a socket) passes.
Status RequireNotServed(const std::string& path);

// Takes an exclusive lock on `dir` (created if missing) for the life of the process, so that two hosts never share
// state. Fails with FAILED_PRECONDITION when another process holds it.
Status LockDirectory(const std::string& dir);

}  // namespace csi_proxy::host

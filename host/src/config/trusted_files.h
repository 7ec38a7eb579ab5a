// The files a root host takes code and settings from (group libraries, the configuration) and the directory it
// serves in must not be writable by anyone but root (or the host's own user): a library a non-root user can
// replace is root code execution. Development setups may opt out with --allow-untrusted-files.
#pragma once

#include <string>

#include "csi_proxy/status.hpp"

namespace csi_proxy::host {

// PERMISSION_DENIED naming the file when `path` (after symlinks) or its directory is owned by another user than
// root or the host's own, or is writable by its group or by others (a directory with the sticky bit, as /tmp,
// only when it is root's). `what` names the file in the message ("the library", "the configuration file").
Status CheckTrustedFile(const std::string& path, const std::string& what);

// The same for a directory the host serves sockets in, when it exists.
Status CheckTrustedDirectory(const std::string& path, const std::string& what);

// Turns the checks off (the --allow-untrusted-files flag); they then always pass.
void AllowUntrustedFiles();

}  // namespace csi_proxy::host

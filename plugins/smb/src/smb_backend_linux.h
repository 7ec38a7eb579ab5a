// The Linux SMB backend. A global mapping is a CIFS mount of //server/share at <mount_root>/<server>/<share>,
// a directory the proxy owns, shared by every caller that maps the same share. The password reaches mount.cifs
// only through its environment (PASSWD), which only root can read for a root process; never through argv, a
// file, a log line or an error message.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "csi_proxy/status.hpp"
#include "path_policy.h"
#include "smb_backend.h"

namespace csi_proxy::smb {

// The configured options (mount_helper empty: mount.cifs from the system directories; smb_version is mount.cifs's
// "vers=") and what only the Linux backend has.
struct LinuxSmbOptions : SmbBackendOptions {
  std::chrono::milliseconds health_timeout{std::chrono::seconds(10)};
  // Whether the kernel can mount cifs; EnsureKernelCifs when unset. Tests on kernels without cifs replace it to
  // reach the mount helper.
  std::function<Status()> cifs_support;
};

// Creates the mount root (0755) if needed (a check only looks at it). `policy` confines local_path links.
StatusOr<std::unique_ptr<SmbBackend>> MakeLinuxSmbBackend(LinuxSmbOptions options, common::PathPolicy policy);

// OK when the kernel can mount cifs (listed in /proc/filesystems, or the module can be loaded and was);
// FAILED_PRECONDITION naming what is missing otherwise. With `check_only` no module is loaded.
Status EnsureKernelCifs(bool check_only = false);

// The mount.cifs option string (no password in it; the password goes in the environment).
std::string MountOptions(const SmbCredentials& credentials, const LinuxSmbOptions& options);

}  // namespace csi_proxy::smb

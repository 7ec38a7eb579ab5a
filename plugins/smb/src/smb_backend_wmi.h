// The SMB group's backend on Windows, written against seams so that it is portable and unit-tested on Linux with
// recorded answers: a global mapping is an MSFT_SmbGlobalMapping (plugins/common/smb_global_mapping.h) reached
// through a wmi::Connector, a local_path link is a directory symlink to the share's UNC path made through SmbLinks
// (as upstream's NewSmbLink makes it), and a mapping's users are counted as on Linux
// (plugins/common/smb_mapping_users.h). smb_backend_windows.cc gives it ConnectWmi and the file system's symlinks.
#pragma once

#include <memory>
#include <string>

#include "path_policy.h"
#include "smb_backend.h"
#include "smb_mapping_users.h"
#include "wmi.h"

namespace csi_proxy::smb {

// The local_path links of the Windows backend. `target` is the share's UNC path with the link's sub-path.
class SmbLinks {
 public:
  virtual ~SmbLinks() = default;
  // OK when `local`'s parent exists inside the allowed roots and the name is free or already a link to `target`;
  // NOT_FOUND for a missing parent, ALREADY_EXISTS for anything else at the name.
  virtual Status Check(const common::ConfinedPath& local, const std::string& target) = 0;
  // Makes `local` a directory symlink to `target`; success when it already is one.
  virtual Status Make(const common::ConfinedPath& local, const std::string& target) = 0;
};

// What the backend talks to.
struct WmiSmbSystem {
  common::wmi::Connector connect;   // ConnectWmi on Windows
  std::unique_ptr<SmbLinks> links;  // directory symlinks on Windows
  // How the users' count sees links and unmaps (empty members: the system's own, smb_mapping_users_windows.cc).
  common::SmbMappingUsers::System users;
};

// `options.require_privacy` and `options.state_dir` are used; the other options are Linux's.
std::unique_ptr<SmbBackend> MakeWmiSmbBackend(const SmbBackendOptions& options, common::PathPolicy policy,
                                              WmiSmbSystem system);

// The share's UNC path ("\\server\share"): the global mapping's RemotePath, lowercase as upstream maps it.
std::string UncShare(const RemotePath& remote);
// A local_path link's target: the share's UNC path, the remote path's sub-path, and a final '\' (upstream adds
// one: Go resolves paths on shares only with it).
std::string UncLinkTarget(const RemotePath& remote);

}  // namespace csi_proxy::smb

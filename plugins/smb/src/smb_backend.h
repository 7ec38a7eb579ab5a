// The OS side of the SMB group: what the service layer asks of the machine. Inputs arrive validated; the Linux
// implementation mounts with mount.cifs, Windows would use MSFT_SmbGlobalMapping and directory symlinks.
#pragma once

#include <string>

#include "csi_proxy/status.hpp"
#include "path_policy.h"
#include "smb_types.h"

namespace csi_proxy::smb {

enum class MappingState {
  kNotMapped,
  kHealthy,      // mapped and the server answers
  kUnreachable,  // mapped, but the share does not answer (server gone, session expired, password changed)
};

struct MappingStatus {
  MappingState state = MappingState::kNotMapped;
  std::string detail;  // why it is unreachable, for the log
};

class SmbBackend {
 public:
  virtual ~SmbBackend() = default;

  virtual StatusOr<MappingStatus> GetMapping(const RemotePath& remote) = 0;
  // Maps the share (remote.subpath is ignored: the mapping is per share). Fails if it is already mapped.
  virtual Status Map(const RemotePath& remote, const SmbCredentials& credentials) = 0;
  // Removes the mapping of the share; success when it is not mapped.
  virtual Status Unmap(const RemotePath& remote) = 0;

  // Checks, before anything is mapped, that `local` can become (or already is) the link to `remote`:
  // its parent exists inside the allowed roots and the name is free or already that very link.
  virtual Status CheckLink(const common::ConfinedPath& local, const RemotePath& remote) = 0;
  // Makes `local` a symlink to the mapping of `remote` plus its sub-path. Success if it already is one.
  virtual Status Link(const common::ConfinedPath& local, const RemotePath& remote) = 0;
};

}  // namespace csi_proxy::smb

// The OS side of the SMB group: what the service layer asks of the machine. Inputs arrive validated; the Linux
// implementation mounts with mount.cifs (smb_backend_linux.cc), the Windows one makes MSFT_SmbGlobalMapping
// global mappings and directory symlinks (smb_backend_wmi.cc, smb_backend_windows.cc).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

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

// Who uses a mapping: the local_path links to it that are still there, and whether it was mapped without a
// local_path (and not removed since). A mapping is unmapped only when it has no users.
struct MappingUsers {
  std::vector<std::string> links;
  bool pinned = false;
  bool used() const { return pinned || !links.empty(); }
  // "2 local_path links ("/a", "/b") and a mapping made without a local_path", for the log.
  std::string Describe() const;
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

  // The users of the mapping of `remote`'s share, kept where the filesystem group, which removes local_path
  // links (and unmaps a mapping whose last link it removed), sees them too. Users, AddUser and DropPin are called
  // while the returned lock is held; it serializes them with the filesystem group.
  virtual StatusOr<std::shared_ptr<void>> LockUsers(const RemotePath& remote) = 0;
  // Counts `local` (the link just made) as a user, or, without one, the mapping itself until it is removed.
  virtual Status AddUser(const RemotePath& remote, const common::ConfinedPath* local) = 0;
  // Forgets that the mapping was made without a local_path (RemoveSmbGlobalMapping).
  virtual Status DropPin(const RemotePath& remote) = 0;
  virtual StatusOr<MappingUsers> Users(const RemotePath& remote) = 0;
};

// What the group's configuration sets for the platform's backend.
struct SmbBackendOptions {
  std::string mount_root = "/var/lib/csi-proxy/smb";  // where the mappings live
  std::string mount_helper;                           // absolute path of the mount program; empty: the platform's own
  bool require_privacy = true;                        // SMB3 encryption ("seal"), as upstream's -require-privacy
  uint16_t port = 445;                                // the server's SMB port
  std::string smb_version;                            // the dialect to ask for ("3.1.1", ...); empty: negotiate
  std::chrono::milliseconds mount_timeout{std::chrono::seconds(60)};
  // [host] state_dir: the users of each mapping are recorded under it, for the filesystem group too. Empty: none
  // are recorded, and RemoveSmbGlobalMapping always unmaps.
  std::string state_dir;
  LogSink log;
  // A configuration check (sdk::Host::check_only): mount_root is checked when it exists, never created.
  bool check_only = false;
};

// The platform's backend (smb_backend_linux.cc, smb_backend_windows.cc). `policy` confines local_path links.
StatusOr<std::unique_ptr<SmbBackend>> MakeSmbBackend(const SmbBackendOptions& options, common::PathPolicy policy);

// OK when this machine can map SMB shares; otherwise why not (Linux: FAILED_PRECONDITION naming what the kernel
// lacks; Windows: UNIMPLEMENTED naming the SMB client's missing WMI namespace or class). With `check_only`
// nothing is loaded: a kernel whose cifs module is not loaded yet is only said so.
Status CheckSmbSupport(bool check_only = false);

// The group keys only the other system's backend reads ([groups.smb] README); set here, they are refused.
std::vector<std::string_view> KeysOfTheOtherSystem();

// Where this system's mappings are, for the group's first log line ("mappings under /var/lib/csi-proxy/smb").
std::string WhereMappingsAre(const SmbBackendOptions& options);

}  // namespace csi_proxy::smb

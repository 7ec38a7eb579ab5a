// The users of the SMB group's mappings as both systems' backends record them (common::SmbMappingUsers under
// [host] state_dir, where the filesystem group sees them too): what SmbBackend's LockUsers, AddUser, DropPin and
// Users do, written once for the Linux and the Windows backend.
#pragma once

#include <memory>
#include <string>

#include "csi_proxy/status.hpp"
#include "path_policy.h"
#include "smb_backend.h"
#include "smb_mapping_users.h"
#include "smb_types.h"

namespace csi_proxy::smb {

class SmbUsers {
 public:
  // Nothing is recorded without a state_dir (RemoveSmbGlobalMapping then always unmaps). `system`: how links are
  // seen and mappings unmapped (empty members: the system's own).
  SmbUsers(const std::string& state_dir, common::PathPolicy policy, LogSink log,
           common::SmbMappingUsers::System system = {});

  StatusOr<std::shared_ptr<void>> Lock(const RemotePath& remote) const;
  // Counts `local` (a link whose text is `link_text`) as a user, or without one the mapping itself; `reached_at` is
  // where the share is (the mount point, the UNC path).
  Status Add(const RemotePath& remote, const common::ConfinedPath* local, const std::string& reached_at,
             const std::string& link_text) const;
  Status DropPin(const RemotePath& remote) const;
  StatusOr<MappingUsers> Users(const RemotePath& remote) const;

  // The records; null without a state_dir.
  const common::SmbMappingUsers* records() const { return records_.get(); }

 private:
  std::unique_ptr<common::SmbMappingUsers> records_;
};

}  // namespace csi_proxy::smb

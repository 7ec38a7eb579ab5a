// The users of the SMB group's mappings; see smb_users.h.
#include "smb_users.h"

namespace csi_proxy::smb {

SmbUsers::SmbUsers(const std::string& state_dir, common::PathPolicy policy, LogSink log,
                   common::SmbMappingUsers::System system) {
  if (!state_dir.empty()) {
    records_ =
        std::make_unique<common::SmbMappingUsers>(state_dir, std::move(policy), std::move(log), std::move(system));
  }
}

StatusOr<std::shared_ptr<void>> SmbUsers::Lock(const RemotePath& remote) const {
  if (!records_) return std::shared_ptr<void>();
  CSI_PROXY_ASSIGN_OR_RETURN(auto lock, records_->Lock(remote.MappingKey()));
  return std::shared_ptr<void>(std::make_shared<common::RecordLock>(std::move(lock)));
}

Status SmbUsers::Add(const RemotePath& remote, const common::ConfinedPath* local, const std::string& reached_at,
                     const std::string& link_text) const {
  if (!records_) return Status::Ok();
  const common::SmbMapping mapping{remote.MappingKey(), reached_at};
  if (local == nullptr) return records_->Pin(mapping);
  return records_->AddLink(local->path, link_text, mapping);
}

Status SmbUsers::DropPin(const RemotePath& remote) const {
  return records_ ? records_->Unpin(remote.MappingKey()) : Status::Ok();
}

StatusOr<MappingUsers> SmbUsers::Users(const RemotePath& remote) const {
  if (!records_) return MappingUsers{};
  CSI_PROXY_ASSIGN_OR_RETURN(auto use, records_->Users(remote.MappingKey()));
  return MappingUsers{use.links, use.pinned};
}

}  // namespace csi_proxy::smb

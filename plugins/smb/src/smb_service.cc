// The version-agnostic SMB service; see smb_service.h.
#include "smb_service.h"

#include "smb_validation.h"
#include "text.h"

namespace csi_proxy::smb {

std::string MappingUsers::Describe() const {
  std::string text;
  if (!links.empty()) {
    text = std::to_string(links.size()) + " local_path link" + (links.size() == 1 ? "" : "s") + " (";
    for (size_t i = 0; i < links.size(); ++i) text += (i ? ", " : "") + common::QuotePath(links[i]);
    text += ")";
  }
  if (pinned) text += std::string(text.empty() ? "" : " and ") + "a mapping made without a local_path";
  return text.empty() ? "nothing" : text;
}

SmbService::SmbService(std::unique_ptr<SmbBackend> backend, common::PathPolicy policy, LogSink log)
    : backend_(std::move(backend)), policy_(std::move(policy)), log_(std::move(log)) {}

void SmbService::Log(LogLevel level, const std::string& message) const {
  if (log_) log_(level, message);
}

Status SmbService::NewSmbGlobalMapping(const std::string& remote_path, const std::string& local_path,
                                       const std::string& username, const std::string& password) {
  // Every field is checked before anything happens (upstream checked local_path only after mapping).
  CSI_PROXY_ASSIGN_OR_RETURN(auto remote, ParseRemotePath(remote_path));
  CSI_PROXY_ASSIGN_OR_RETURN(auto credentials, ParseCredentials(username, password));
  std::optional<common::ConfinedPath> local;
  if (!local_path.empty()) {
    CSI_PROXY_ASSIGN_OR_RETURN(auto confined, policy_.Confine(local_path, "local_path"));
    local = std::move(confined);
  }

  const std::string key = remote.MappingKey();
  auto lock = share_locks_.Hold(key);
  CSI_PROXY_ASSIGN_OR_RETURN(auto users_lock, backend_->LockUsers(remote));
  if (local) CSI_PROXY_RETURN_IF_ERROR(backend_->CheckLink(*local, remote));

  CSI_PROXY_ASSIGN_OR_RETURN(auto status, backend_->GetMapping(remote));
  if (status.state == MappingState::kUnreachable) {
    // Upstream removes a mapping whose share no longer answers and maps it again.
    Log(LogLevel::kWarn, "the mapping of " + key + " does not answer (" + status.detail + "); remapping it");
    CSI_PROXY_RETURN_IF_ERROR(backend_->Unmap(remote));
  }
  if (status.state != MappingState::kHealthy) {
    CSI_PROXY_RETURN_IF_ERROR(backend_->Map(remote, credentials));
    Log(LogLevel::kInfo, "mapped " + key);
  }
  // The link (or, without one, the mapping itself) counts as a user from now on, so no other volume's removal
  // unmaps the share. Counted before the link exists: a link that never came to be counts for nothing.
  CSI_PROXY_RETURN_IF_ERROR(backend_->AddUser(remote, local ? &*local : nullptr));
  if (local) CSI_PROXY_RETURN_IF_ERROR(backend_->Link(*local, remote));
  return Status::Ok();
}

Status SmbService::RemoveSmbGlobalMapping(const std::string& remote_path) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto remote, ParseRemotePath(remote_path));
  const std::string key = remote.MappingKey();
  auto lock = share_locks_.Hold(key);
  CSI_PROXY_ASSIGN_OR_RETURN(auto users_lock, backend_->LockUsers(remote));
  // The mapping stays while another local_path link still uses it (Trident removes mappings unconditionally;
  // several volumes often share one share). Its last link's removal (a Rmdir in the filesystem group) unmaps it.
  CSI_PROXY_RETURN_IF_ERROR(backend_->DropPin(remote));
  CSI_PROXY_ASSIGN_OR_RETURN(auto users, backend_->Users(remote));
  if (users.used()) {
    Log(LogLevel::kInfo, "the mapping of " + key + " stays: it is still used by " + users.Describe() +
                             "; it is unmapped when the last of them is removed");
    return Status::Ok();
  }
  // Removing a share that is not mapped is success (upstream fails, which breaks retries). Links made with
  // local_path stay, as upstream leaves them.
  return backend_->Unmap(remote);
}

}  // namespace csi_proxy::smb

// The version-agnostic SMB service; see smb_service.h.
#include "smb_service.h"

#include "smb_validation.h"

namespace csi_proxy::smb {

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
  if (local) CSI_PROXY_RETURN_IF_ERROR(backend_->Link(*local, remote));
  return Status::Ok();
}

Status SmbService::RemoveSmbGlobalMapping(const std::string& remote_path) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto remote, ParseRemotePath(remote_path));
  auto lock = share_locks_.Hold(remote.MappingKey());
  // Removing a share that is not mapped is success (upstream fails, which breaks retries). Links made with
  // local_path stay, as upstream leaves them.
  return backend_->Unmap(remote);
}

}  // namespace csi_proxy::smb

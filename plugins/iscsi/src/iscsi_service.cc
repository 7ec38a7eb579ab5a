// The version-agnostic iSCSI service; see iscsi_service.h.
#include "iscsi_service.h"

#include "iscsi_validation.h"

namespace csi_proxy::iscsi {

IscsiService::IscsiService(std::unique_ptr<IscsiBackend> backend, LogSink log)
    : backend_(std::move(backend)), log_(std::move(log)) {}

void IscsiService::Log(LogLevel level, const std::string& message) const {
  if (log_) log_(level, message);
}

StatusOr<Portal> IscsiService::CheckPortal(const OptionalPortal& portal) const {
  // Upstream dereferenced the missing message and crashed the whole process.
  if (!portal) return InvalidArgument("target_portal is required");
  return ValidatePortal(portal->address, portal->port);
}

Status IscsiService::RequireRegistered(const Portal& portal) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto portals, backend_->ListPortals());
  for (const auto& p : portals) {
    if (p == portal) return Status::Ok();
  }
  return NotFound("target portal " + PortalToString(portal) + " is not registered; call AddTargetPortal first");
}

Status IscsiService::AddTargetPortal(const OptionalPortal& request) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto portal, CheckPortal(request));
  auto lock = portal_locks_.Hold(PortalToString(portal));
  CSI_PROXY_RETURN_IF_ERROR(backend_->AddPortal(portal));
  Log(LogLevel::kInfo, "registered iSCSI target portal " + PortalToString(portal));
  return Status::Ok();
}

StatusOr<std::vector<std::string>> IscsiService::DiscoverTargetPortal(const OptionalPortal& request) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto portal, CheckPortal(request));
  CSI_PROXY_RETURN_IF_ERROR(RequireRegistered(portal));
  auto iqns = backend_->DiscoverTargets(portal);
  if (!iqns.ok()) return iqns.status().WithContext("discovering targets at " + PortalToString(portal));
  Log(LogLevel::kDebug, "portal " + PortalToString(portal) + " offers " + std::to_string(iqns->size()) + " target(s)");
  return iqns;
}

Status IscsiService::RemoveTargetPortal(const OptionalPortal& request) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto portal, CheckPortal(request));
  auto lock = portal_locks_.Hold(PortalToString(portal));
  Status removed = backend_->RemovePortal(portal);
  // Removing a portal that is not registered is success: a retried call must not fail (upstream errors).
  if (removed.code() == Code::kNotFound) return Status::Ok();
  CSI_PROXY_RETURN_IF_ERROR(removed);
  Log(LogLevel::kInfo, "unregistered iSCSI target portal " + PortalToString(portal));
  return Status::Ok();
}

StatusOr<std::vector<Portal>> IscsiService::ListTargetPortals() { return backend_->ListPortals(); }

Status IscsiService::ConnectTarget(const ConnectTargetRequest& request) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto portal, CheckPortal(request.portal));
  CSI_PROXY_RETURN_IF_ERROR(ValidateIqn(request.iqn));
  CSI_PROXY_ASSIGN_OR_RETURN(auto type, ValidateAuthType(request.auth_type));
  // Checked whatever the type, so no field can carry unchecked text past this point.
  if (!request.chap_username.empty()) {
    CSI_PROXY_RETURN_IF_ERROR(ValidateChapName(request.chap_username, "chap_username"));
  }
  if (!request.chap_secret.empty()) {
    CSI_PROXY_RETURN_IF_ERROR(ValidateChapSecret(request.chap_secret, "chap_secret"));
  }
  ChapLogin login;
  login.type = type;
  if (type != AuthType::kNone) {
    if (request.chap_secret.empty()) return InvalidArgument("chap_secret is required for CHAP authentication");
    login.username = request.chap_username;  // empty: the backend uses the initiator name, as Windows does
    login.secret = request.chap_secret;
  }
  CSI_PROXY_RETURN_IF_ERROR(RequireRegistered(portal));
  auto lock = target_locks_.Hold(request.iqn + "@" + PortalToString(portal));
  Status connected = backend_->Connect(portal, request.iqn, login);
  if (!connected.ok()) return connected.WithContext("connecting to " + request.iqn + " at " + PortalToString(portal));
  Log(LogLevel::kInfo, "connected to iSCSI target " + request.iqn + " at " + PortalToString(portal));
  return Status::Ok();
}

Status IscsiService::DisconnectTarget(const OptionalPortal& request, const std::string& iqn) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto portal, CheckPortal(request));
  CSI_PROXY_RETURN_IF_ERROR(ValidateIqn(iqn));
  auto lock = target_locks_.Hold(iqn + "@" + PortalToString(portal));
  Status done = backend_->Disconnect(portal, iqn);
  if (!done.ok()) return done.WithContext("disconnecting from " + iqn + " at " + PortalToString(portal));
  Log(LogLevel::kInfo, "disconnected from iSCSI target " + iqn + " at " + PortalToString(portal));
  return Status::Ok();
}

StatusOr<std::vector<std::string>> IscsiService::GetTargetDisks(const OptionalPortal& request, const std::string& iqn) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto portal, CheckPortal(request));
  CSI_PROXY_RETURN_IF_ERROR(ValidateIqn(iqn));
  CSI_PROXY_ASSIGN_OR_RETURN(auto numbers, backend_->TargetDisks(portal, iqn));
  std::vector<std::string> ids;
  for (uint64_t n : numbers) ids.push_back(std::to_string(n));
  return ids;
}

Status IscsiService::SetMutualChapSecret(const std::string& secret) {
  if (!secret.empty()) CSI_PROXY_RETURN_IF_ERROR(ValidateChapSecret(secret, "MutualChapSecret"));
  std::lock_guard lock(secret_lock_);
  CSI_PROXY_RETURN_IF_ERROR(backend_->SetMutualChapSecret(secret));
  Log(LogLevel::kInfo, secret.empty() ? "cleared the mutual CHAP secret" : "stored a new mutual CHAP secret");
  return Status::Ok();
}

}  // namespace csi_proxy::iscsi

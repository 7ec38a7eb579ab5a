// The version-agnostic iSCSI service: validates every request field, applies upstream's semantics (port 0 means
// 3260, a discovered target needs a registered portal, ...), serializes work per portal and per target, and
// calls the OS backend. The versioned proto adapters (v1alpha1, v1alpha2) only convert messages to these calls.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "csi_proxy/status.hpp"
#include "iscsi_backend.h"
#include "iscsi_types.h"
#include "keyed_mutex.h"

namespace csi_proxy::iscsi {

// A target portal as a request carries it; nullopt when the request has no target_portal message.
struct PortalRequest {
  std::string address;
  uint32_t port = 0;
};
using OptionalPortal = std::optional<PortalRequest>;

struct ConnectTargetRequest {
  OptionalPortal portal;
  std::string iqn;
  int32_t auth_type = 0;
  std::string chap_username;
  std::string chap_secret;
};

class IscsiService {
 public:
  IscsiService(std::unique_ptr<IscsiBackend> backend, LogSink log);

  Status AddTargetPortal(const OptionalPortal& portal);
  StatusOr<std::vector<std::string>> DiscoverTargetPortal(const OptionalPortal& portal);
  Status RemoveTargetPortal(const OptionalPortal& portal);
  StatusOr<std::vector<Portal>> ListTargetPortals();
  bool ListsPortalsFromMemory() const { return backend_->ListsPortalsFromMemory(); }
  Status ConnectTarget(const ConnectTargetRequest& request);
  Status DisconnectTarget(const OptionalPortal& portal, const std::string& iqn);
  StatusOr<std::vector<std::string>> GetTargetDisks(const OptionalPortal& portal, const std::string& iqn);
  Status SetMutualChapSecret(const std::string& secret);

 private:
  StatusOr<Portal> CheckPortal(const OptionalPortal& portal) const;
  Status RequireRegistered(const Portal& portal);
  void Log(LogLevel level, const std::string& message) const;

  std::unique_ptr<IscsiBackend> backend_;
  LogSink log_;
  common::KeyedMutex portal_locks_;  // AddTargetPortal / RemoveTargetPortal of one portal
  common::KeyedMutex target_locks_;  // ConnectTarget / DisconnectTarget of one target through one portal
  std::mutex secret_lock_;
};

}  // namespace csi_proxy::iscsi

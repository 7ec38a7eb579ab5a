// The host's side of the opaque handles in plugin_abi.h, and the function table each plugin receives.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "csi_proxy/plugin_abi.h"
#include "endpoint_registry.h"

namespace csi_proxy::host {
struct PeerCredentials {
  int64_t pid = -1;
  int64_t uid = -1;
  int64_t gid = -1;
};
}  // namespace csi_proxy::host

// One call in flight. Implemented by the serving layer; plugins only hold the pointer.
struct csi_proxy_host_call {
  virtual ~csi_proxy_host_call() = default;
  virtual void Complete(csi_proxy_status_code code, std::string_view message, std::string_view response) = 0;
  virtual int64_t DeadlineUnixNs() const = 0;
  virtual bool IsCancelled() const = 0;
  virtual csi_proxy::host::PeerCredentials Peer() const = 0;
};

// One loaded plugin as the host tracks it while the plugin initialises and serves.
struct csi_proxy_host_context {
  std::string group;                  // the group the library declares; names its endpoints
  std::string library;                // absolute path, for messages
  std::vector<std::string> versions;  // the admin's filter; empty serves all
  const csi_proxy::host::EndpointRegistry* registry = nullptr;
  bool registering = false;
  std::vector<csi_proxy::host::ServiceRegistration> pending;  // committed when init succeeds
  std::vector<std::string> offered_versions;                  // every version the library registered
  std::vector<std::string> skipped_versions;                  // offered but filtered out by the admin
  std::string refusal;                                        // why the host refused a registration, for the log line
};

namespace csi_proxy::host {
// Fills the table a plugin receives; `config_toml` must outlive the plugin.
csi_proxy_host_api MakeHostApi(csi_proxy_host_context* context, const std::string& config_toml);
}  // namespace csi_proxy::host

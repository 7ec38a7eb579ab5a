// The host's side of the per-plugin handle in plugin_abi.h, and the function table each plugin receives.
// The per-call handle is in call_handle.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "abi/call_handle.h"
#include "abi/endpoint_registry.h"
#include "csi_proxy/plugin_abi.h"

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
// Fills the table a plugin receives; `config_toml` must outlive the plugin. `check_only`: the init is a
// configuration check (CSI_PROXY_INIT_CHECK_ONLY).
csi_proxy_host_api MakeHostApi(csi_proxy_host_context* context, const std::string& config_toml, bool check_only);
}  // namespace csi_proxy::host

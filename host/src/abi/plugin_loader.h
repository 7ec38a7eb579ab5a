// Loads one API-group library: open it, negotiate the ABI, initialise it and take its services.
// Every refusal is one sentence that names the group, the file and the reason.
#pragma once

#include <memory>
#include <string>

#include "abi/endpoint_registry.h"
#include "abi/host_context.h"
#include "abi/shared_library.h"
#include "config/config.h"

namespace csi_proxy::host {

// The ABI versions this host speaks.
inline constexpr uint32_t kAbiVersionMin = CSI_PROXY_ABI_VERSION_MIN;
inline constexpr uint32_t kAbiVersionMax = CSI_PROXY_ABI_VERSION_CURRENT;

// The host a library is shown at its load: the ABI versions offered and how much of the host table it gets. The host
// itself is always the newest (the defaults); csi-proxy-plugin-check also presents the oldest host this one stands
// for (version 1, the table without what was appended since), as an older host would load the library.
struct HostPresentation {
  uint32_t abi_version_min = kAbiVersionMin;
  uint32_t abi_version_max = kAbiVersionMax;
  size_t host_api_size = sizeof(csi_proxy_host_api);  // at least CSI_PROXY_HOST_API_V1_SIZE
};

class LoadedPlugin {
 public:
  LoadedPlugin() = default;
  LoadedPlugin(const LoadedPlugin&) = delete;
  LoadedPlugin& operator=(const LoadedPlugin&) = delete;
  ~LoadedPlugin();  // calls Shutdown() if it has not run; the library is unloaded after it

  const std::string& config_name() const { return config_name_; }
  const std::string& group() const { return context_->group; }
  const std::string& library() const { return context_->library; }
  const std::string& plugin_version() const { return plugin_version_; }
  uint32_t abi_version() const { return abi_version_; }
  const std::vector<std::string>& skipped_versions() const { return context_->skipped_versions; }
  // The services the library registered (and the admin's versions filter let through).
  const std::vector<ServiceRegistration>& services() const { return context_->pending; }

  // Calls the plugin's shutdown once. Only after every call into the plugin has completed.
  void Shutdown();

 private:
  friend StatusOr<std::unique_ptr<LoadedPlugin>> LoadPlugin(const GroupConfig&, const HostConfig&, EndpointRegistry&,
                                                            const HostPresentation&);
  std::unique_ptr<SharedLibrary> library_;
  std::string config_name_;
  std::string plugin_version_;
  uint32_t abi_version_ = 0;
  csi_proxy_plugin_api api_{};
  void* plugin_state_ = nullptr;
  bool initialized_ = false;
  std::unique_ptr<csi_proxy_host_context> context_;
  std::string config_toml_;
  csi_proxy_host_api host_api_{};
};

// Loads and initialises `group`; its services must not clash with those already in `registry`, which the caller
// then commits them to (services()). The error message is
// complete for a log line: "group 'disk' (/usr/lib/.../libcsi-proxy-disk.so): <reason>".
StatusOr<std::unique_ptr<LoadedPlugin>> LoadPlugin(const GroupConfig& group, const HostConfig& host,
                                                   EndpointRegistry& registry, const HostPresentation& as = {});

// Whether a group that failed to load with `refusal` stops the host (or a start --check-config simulates): a
// required group, or a mistake in the group's own keys (INVALID_ARGUMENT); otherwise the group is skipped.
inline bool RefusalStopsTheHost(const GroupConfig& group, const Status& refusal) {
  return group.required || refusal.code() == Code::kInvalidArgument;
}

// The TOML document a group receives: [host] node-wide settings and [group] its own keys.
std::string GroupConfigToml(const GroupConfig& group, const HostConfig& host);

}  // namespace csi_proxy::host

// The set of loaded API groups: their libraries and the endpoints they registered, loaded as the configuration
// says. Start-up builds one; a reload will build another and apply the difference.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "abi/endpoint_registry.h"
#include "abi/plugin_loader.h"
#include "config/config.h"

namespace csi_proxy::host {

class GroupSet {
 public:
  GroupSet() = default;
  GroupSet(const GroupSet&) = delete;
  GroupSet& operator=(const GroupSet&) = delete;
  ~GroupSet() { UnloadAll(); }

  // Loads every enabled group of `config`, logging each result. A group that cannot be loaded is recorded in
  // refusals() (and in required_failed() when the configuration requires it); the others load regardless.
  void Load(const HostConfig& config);

  // Shuts the libraries down in reverse load order, then unloads them. Only once no call into them can run.
  void UnloadAll();

  const EndpointRegistry& registry() const { return registry_; }
  const std::vector<std::unique_ptr<LoadedPlugin>>& plugins() const { return plugins_; }
  // Groups that would stop a start (required, or a mistake in their keys), and optional ones that would be skipped.
  const std::vector<std::string>& refusals() const { return refusals_; }
  const std::vector<std::string>& skipped() const { return skipped_; }
  bool required_failed() const { return required_failed_; }

 private:
  EndpointRegistry registry_;
  std::vector<std::unique_ptr<LoadedPlugin>> plugins_;
  std::vector<std::string> refusals_;
  std::vector<std::string> skipped_;
  bool required_failed_ = false;
};

}  // namespace csi_proxy::host

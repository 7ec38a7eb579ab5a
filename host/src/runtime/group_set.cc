// See group_set.h.
#include "runtime/group_set.h"

#include <spdlog/spdlog.h>

namespace csi_proxy::host {

void GroupSet::Load(const HostConfig& config) {
  for (const auto& group : config.groups) {
    if (!group.enabled) {
      spdlog::info("group '{}' is disabled in the configuration", group.name);
      continue;
    }
    auto plugin = LoadPlugin(group, config, registry_);
    if (!plugin.ok()) {
      bool fatal = RefusalStopsTheHost(group, plugin.status());
      spdlog::error("{}{}", plugin.status().message(), fatal ? " (a start would be refused)" : " (would be skipped)");
      (fatal ? refusals_ : skipped_).push_back(plugin.status().message());
      required_failed_ = required_failed_ || fatal;
      continue;
    }
    const auto& p = **plugin;
    registry_.Commit(p.group(), p.library(), p.services());
    spdlog::info("group '{}' loaded from {} (plugin version {}, ABI {})", p.config_name(), p.library(),
                 p.plugin_version(), p.abi_version());
    for (const auto& v : p.skipped_versions()) {
      spdlog::info("group '{}': not serving {} (not in versions)", p.config_name(), v);
    }
    plugins_.push_back(std::move(*plugin));
  }
}

void GroupSet::UnloadAll() {
  while (!plugins_.empty()) plugins_.pop_back();
}

}  // namespace csi_proxy::host

// Fuzzes the host's TOML configuration loader (host/src/config/config.cc ParseConfig) with arbitrary bytes: any input
// must give a HostConfig or an error Status, never a crash, a leak or undefined behaviour.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = csi_proxy::host::ParseConfig(text, "fuzz.toml", "/opt/csi-proxy/bin");
  if (config.ok()) {
    // Touch what a valid result holds, so a dangling view in it would show under ASan.
    size_t total = config->endpoint_dir.size() + config->kubelet_path.size();
    for (const auto& group : config->groups) total += group.name.size() + group.library.size();
    if (total == static_cast<size_t>(-1)) return 1;
  } else if (config.status().message().empty()) {
    __builtin_trap();  // every refusal says why
  }
  return 0;
}

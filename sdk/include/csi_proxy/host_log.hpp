// csi_proxy/host_log.hpp: writing to the host's log from a group library (host->log of the C ABI).
#pragma once

#include <string_view>

#include "csi_proxy/host_table.hpp"
#include "csi_proxy/log.hpp"

namespace csi_proxy::sdk {

// Writes to the host's log (tagged with the group). Safe from any thread once Init has started; before, and in
// code that runs without a host (a unit test of the service layer), it writes nothing.
inline void Log(LogLevel level, std::string_view message) {
  const csi_proxy_host_api* api = internal::HostApi();
  if (api != nullptr) api->log(api->host, static_cast<int32_t>(level), message.data(), message.size());
}
inline void LogDebug(std::string_view m) { Log(LogLevel::kDebug, m); }
inline void LogInfo(std::string_view m) { Log(LogLevel::kInfo, m); }
inline void LogWarn(std::string_view m) { Log(LogLevel::kWarn, m); }
inline void LogError(std::string_view m) { Log(LogLevel::kError, m); }

// The sink (log.hpp) that writes to the host's log: what a group hands its service layer and backend.
inline LogSink HostLogSink() {
  return [](LogLevel level, std::string_view message) { Log(level, message); };
}

}  // namespace csi_proxy::sdk

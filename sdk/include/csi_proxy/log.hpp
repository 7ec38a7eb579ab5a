// csi_proxy/log.hpp: the one C++ log level and the log sink a group's service layer and OS backend write to.
//
// The service layer and backend of a group are protobuf-free cores that do not know the host: they receive a
// LogSink. In production it is csi_proxy::sdk::HostLogSink() (host_log.hpp), which writes to the host's log; tests
// pass a collecting lambda. A sink never receives a secret.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "csi_proxy/plugin_abi.h"

namespace csi_proxy::sdk {

// The levels of host->log(), with the C ABI's values.
enum class LogLevel : int32_t {
  kTrace = CSI_PROXY_LOG_TRACE,
  kDebug = CSI_PROXY_LOG_DEBUG,
  kInfo = CSI_PROXY_LOG_INFO,
  kWarn = CSI_PROXY_LOG_WARN,
  kError = CSI_PROXY_LOG_ERROR,
};

// Where log lines go. Called from any thread the caller runs on; an empty sink drops the lines.
using LogSink = std::function<void(LogLevel, std::string_view)>;

}  // namespace csi_proxy::sdk

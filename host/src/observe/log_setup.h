// The host's log: spdlog on standard error, as text or JSON lines ([host] log_format), timestamps with time zone.
#pragma once

#include <string>

namespace csi_proxy::host {

// Sets up the default logger. `format` is "text" or "json"; `level` a name IsValidLogLevel accepts.
void SetUpLogging(const std::string& level, const std::string& format);

// Logs the reason of an unhandled exception (or an abort through std::terminate) as the last line, then aborts.
void LogFatalErrorsOnTerminate();

}  // namespace csi_proxy::host

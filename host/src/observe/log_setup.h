// The host's log: spdlog on standard error and, when asked (Windows: upstream's -log_file), in a file, as text or
// JSON lines ([host] log_format), timestamps with time zone.
#pragma once

#include <cstddef>
#include <string>

#include "csi_proxy/status.hpp"

namespace csi_proxy::host {

// Sets up the default logger. `format` is "text" or "json"; `level` a name IsValidLogLevel accepts. With `file`,
// lines are appended to it too, and once it passes `file_max_bytes` (unless 0) it becomes <name>.1<ext> and a new
// one starts; `to_stderr` false leaves standard error out. Fails when the file cannot be opened.
Status SetUpLogging(const std::string& level, const std::string& format, const std::string& file = "",
                    size_t file_max_bytes = 0, bool to_stderr = true);

// Logs the reason of an unhandled exception (or an abort through std::terminate) as the last line, then aborts.
void LogFatalErrorsOnTerminate();

}  // namespace csi_proxy::host

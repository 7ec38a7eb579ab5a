// How a group's service layer and OS backend write log lines without knowing the host: a callback that takes a
// level and a line. In production it is HostLog (host_log.h); tests pass a collecting lambda.
#pragma once

#include <functional>
#include <string>

namespace csi_proxy::common {

enum class LogLevel { kDebug, kInfo, kWarning, kError };
// Where the group writes its log lines. Never receives a secret.
using LogFn = std::function<void(LogLevel, const std::string&)>;

}  // namespace csi_proxy::common

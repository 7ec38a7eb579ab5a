// The LogFn of group_log.h that writes to the host's log. Only for a group's plugin.cc (it needs the SDK layer).
#pragma once

#include <string>

#include "csi_proxy/plugin.hpp"
#include "group_log.h"

namespace csi_proxy::common {

inline void HostLog(LogLevel level, const std::string& message) {
  switch (level) {
    case LogLevel::kDebug:
      return sdk::LogDebug(message);
    case LogLevel::kInfo:
      return sdk::LogInfo(message);
    case LogLevel::kWarning:
      return sdk::LogWarn(message);
    case LogLevel::kError:
      return sdk::LogError(message);
  }
}

}  // namespace csi_proxy::common

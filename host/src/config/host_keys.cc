// See host_keys.h.
#include "config/host_keys.h"

#include <type_traits>
#include <vector>

#include "config/default_paths.h"

namespace csi_proxy::host {
namespace {

using R = HostKeyRule;
using On = HostKeyReload;
constexpr HostKeySystem kLinuxOnly = HostKeySystem::kLinux;
constexpr HostKeySystem kWindowsOnly = HostKeySystem::kWindows;

constexpr int64_t kMaxConnections = 1000000;
constexpr int64_t kMaxStreams = 1000000;

const HostKey kHostKeys[] = {
    {"endpoint_dir", &HostConfig::endpoint_dir, R::kAbsolutePath, On::kAtNextStart},
    {"admin_socket", &HostConfig::admin_socket, R::kAbsolutePathIfSet, On::kAtNextStart},
    {"plugin_dir", &HostConfig::plugin_dir, R::kAbsolutePathIfSet, On::kThroughGroups},
    {"kubelet_path", &HostConfig::kubelet_path, R::kAbsolutePath, On::kThroughGroups},
    {"working_dirs", &HostConfig::working_dirs, R::kAbsolutePaths, On::kThroughGroups},
    {"state_dir", &HostConfig::state_dir, R::kAbsolutePath, On::kThroughGroups},
    {"log_level", &HostConfig::log_level, R::kLogLevel, On::kNow},
    {"log_format", &HostConfig::log_format, R::kLogFormat, On::kNow, 0, 0,
     "log_format takes effect for the host log at the next start (the audit log follows it now)"},
    {"audit_log", &HostConfig::audit_log, R::kAbsolutePathOrStderr, On::kNow},
    {"audit_log_overflow", &HostConfig::audit_log_overflow, R::kAuditOverflow, On::kNow},
    {"socket_group", &HostConfig::socket_group, R::kSystemGroup, On::kAtNextStart, 0, 0, {}, kLinuxOnly},
    {"allowed_uids", &AccessLists::allowed_uids, R::kIdList, On::kAuthorization},
    {"allowed_gids", &AccessLists::allowed_gids, R::kIdList, On::kAuthorization},
    {"read_only_uids", &AccessLists::read_only_uids, R::kIdList, On::kAuthorization},
    {"read_only_gids", &AccessLists::read_only_gids, R::kIdList, On::kAuthorization},
    {"check_caller_process", &HostConfig::check_caller_process, R::kBool, On::kAtNextStart},
    {"metrics_address", &HostConfig::metrics_address, R::kMetricsAddress, On::kAtNextStart},
    {"workers", &HostConfig::workers, R::kInteger, On::kThroughGroups, 1, 1024},
    {"max_connections", &HostConfig::max_connections, R::kInteger, On::kAtNextStart, 16, kMaxConnections},
    {"max_connections_per_uid", &HostConfig::max_connections_per_uid, R::kInteger, On::kAtNextStart, 1,
     kMaxConnections},
    {"max_connections_per_endpoint", &HostConfig::max_connections_per_endpoint, R::kInteger, On::kAtNextStart, 1,
     kMaxConnections},
    // The Windows listener does not take it yet.
    {"max_connections_unlisted", &HostConfig::max_connections_unlisted, R::kInteger, On::kAtNextStart, 1,
     kMaxConnections, "", kLinuxOnly},
    {"handshake_timeout_seconds", &HostConfig::handshake_timeout, R::kSeconds, On::kAtNextStart, 1, 3600},
    {"idle_timeout_seconds", &HostConfig::idle_timeout, R::kSeconds, On::kAtNextStart, 1, 7 * 24 * 3600},
    {"max_streams_per_connection", &HostConfig::max_streams_per_connection, R::kInteger, On::kAtNextStart, 1,
     kMaxStreams},
    {"max_streams_per_uid", &HostConfig::max_streams_per_uid, R::kInteger, On::kAtNextStart, 1, kMaxStreams},
    {"max_streams", &HostConfig::max_streams, R::kInteger, On::kAtNextStart, 1, kMaxStreams},
    {"max_health_watches", &HostConfig::max_health_watches, R::kInteger, On::kAtNextStart, 0, kMaxStreams},
    {"request_timeout_seconds", &HostConfig::request_timeout, R::kSeconds, On::kAtNextStart, 1, 3600},
    {"shutdown_timeout_seconds", &HostConfig::shutdown_timeout, R::kSeconds, On::kNow, 0, 3600},
    {"load_timeout_seconds", &HostConfig::load_timeout, R::kSeconds, On::kNow, 1, 3600},
    {"socket_mode", &HostConfig::socket_mode, R::kOctalMode, On::kAtNextStart, 0, 0, {}, kLinuxOnly},
    {"pipe_sddl", &HostConfig::pipe_sddl, R::kSecurityDescriptor, On::kAtNextStart, 0, 0, {}, kWindowsOnly},
};

bool OnThisSystem(const HostKey& key) {
  return key.system == HostKeySystem::kAll ||
         key.system == (ThisSystem() == OperatingSystem::kWindows ? HostKeySystem::kWindows : HostKeySystem::kLinux);
}

// Calls `fn` with a reference to `key`'s value in `config`.
template <typename Config, typename Fn>
decltype(auto) WithValue(const HostKey& key, Config& config, Fn&& fn) {
  return std::visit(
      [&](auto member) -> decltype(auto) {
        if constexpr (std::is_same_v<decltype(member), std::optional<std::vector<AccountId>> AccessLists::*>) {
          return fn(config.access.*member);
        } else {
          return fn(config.*member);
        }
      },
      key.field);
}

}  // namespace

std::span<const HostKey> HostKeys() {
  static const std::vector<HostKey> keys = [] {
    std::vector<HostKey> out;
    for (const HostKey& key : kHostKeys) {
      if (OnThisSystem(key)) out.push_back(key);
    }
    return out;
  }();
  return keys;
}

const HostKey* OtherSystemHostKey(std::string_view name) {
  for (const HostKey& key : kHostKeys) {
    if (key.name == name && !OnThisSystem(key)) return &key;
  }
  return nullptr;
}

bool SameHostKeyValue(const HostKey& key, const HostConfig& a, const HostConfig& b) {
  return WithValue(key, a, [&](const auto& va) {
    return WithValue(key, b, [&](const auto& vb) {
      if constexpr (std::is_same_v<decltype(va), decltype(vb)>) {
        return va == vb;
      } else {
        return false;  // one key, one field: never reached
      }
    });
  });
}

void CopyHostKeyValue(const HostKey& key, const HostConfig& from, HostConfig& to) {
  WithValue(key, from, [&](const auto& value) {
    WithValue(key, to, [&](auto& target) {
      if constexpr (std::is_same_v<std::decay_t<decltype(value)>, std::decay_t<decltype(target)>>) target = value;
    });
  });
}

std::string HostKeyValueText(const HostKey& key, const HostConfig& config) {
  return WithValue(key, config, [](const auto& value) -> std::string {
    using T = std::decay_t<decltype(value)>;
    if constexpr (std::is_same_v<T, std::string>) {
      return value.empty() ? "off" : value;
    } else if constexpr (std::is_same_v<T, bool>) {
      return value ? "true" : "false";
    } else if constexpr (std::is_same_v<T, int> || std::is_same_v<T, uint32_t>) {
      return std::to_string(value);
    } else if constexpr (std::is_same_v<T, std::chrono::seconds> || std::is_same_v<T, std::chrono::milliseconds>) {
      return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(value).count());
    } else {
      std::string out;
      if constexpr (std::is_same_v<T, std::vector<std::string>>) {
        for (const auto& item : value) out += (out.empty() ? "" : ",") + item;
      } else {
        if (!value) return "unset";
        for (const AccountId& id : *value) out += (out.empty() ? "" : ",") + AccountText(id);
      }
      return "[" + out + "]";
    }
  });
}

}  // namespace csi_proxy::host

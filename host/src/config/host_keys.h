// The keys of the [host] table, each said once: its name, the HostConfig field it fills, the rule its value must
// follow and how a running host takes a change of it. The parser reads the file through this table (a key not in
// it is an error) and the reload plan compares two configurations through it.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "config/config.h"

namespace csi_proxy::host {

// Where a [host] key's value lives.
using HostKeyField =
    std::variant<std::string HostConfig::*, std::vector<std::string> HostConfig::*, int HostConfig::*,
                 bool HostConfig::*, uint32_t HostConfig::*, std::chrono::seconds HostConfig::*,
                 std::chrono::milliseconds HostConfig::*, std::optional<std::vector<AccountId>> AccessLists::*>;

// The rule a value follows; the parser checks it and names the key and the line when it is broken.
enum class HostKeyRule {
  kAbsolutePath,          // a string starting with '/'
  kAbsolutePathIfSet,     // the same, or absent (the host derives it)
  kAbsolutePathOrStderr,  // the same, or "-"
  kAbsolutePaths,         // an array of absolute paths
  kLogLevel,              // IsValidLogLevel
  kLogFormat,             // "text" or "json"
  kAuditOverflow,         // "drop" or "refuse"
  kBool,                  // true or false
  kInteger,               // an integer from min to max
  kSeconds,               // an integer number of seconds from min to max
  kOctalMode,             // 0o660 or "0660", at most 0777
  kSystemGroup,           // a group name or a numeric gid the system knows
  kIdList,                // an array of ids or names (uids or gids: the key's name says which)
  kMetricsAddress,        // IsValidMetricsAddress
  kSecurityDescriptor,    // a Windows security descriptor in SDDL (CheckSecurityDescriptor)
};

// The system a key has a meaning on. A key of the other system is not in HostKeys(), and the parser refuses it
// saying so rather than "not a known key".
enum class HostKeySystem { kAll, kLinux, kWindows };

// How a running host takes a change of the key at a reload.
enum class HostKeyReload {
  kNow,            // the host applies the new value at once
  kThroughGroups,  // the key shapes the groups (what they are handed, their budget, their library's place): the
                   // groups it changes are loaded anew
  kAuthorization,  // the groups whose lists it changes are rebound; their libraries stay
  kAtNextStart,    // read only at start: a reload keeps the running value and says so
};

struct HostKey {
  std::string_view name;
  HostKeyField field;
  HostKeyRule rule;
  HostKeyReload reload;
  int64_t min = 0;  // kInteger, kSeconds
  int64_t max = 0;
  std::string_view reload_note = {};  // said when a reload changes the key, beside what the reload kind says
  HostKeySystem system = HostKeySystem::kAll;
};

// Every [host] key of the system the host runs on, in the order the parser reads them.
std::span<const HostKey> HostKeys();
// The key `name` when it has a meaning on another system only; null otherwise.
const HostKey* OtherSystemHostKey(std::string_view name);

// Whether `a` and `b` hold the same value for `key`.
bool SameHostKeyValue(const HostKey& key, const HostConfig& a, const HostConfig& b);
// Copies `key`'s value of `from` into `to`.
void CopyHostKeyValue(const HostKey& key, const HostConfig& from, HostConfig& to);
// `key`'s value for a report line: "debug", "5" (seconds), "off" (an empty path or address).
std::string HostKeyValueText(const HostKey& key, const HostConfig& config);

}  // namespace csi_proxy::host

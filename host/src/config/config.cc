// Parses and validates the host configuration; every error names the key and the line it is on.
#include "config/config.h"

#include "config/host_keys.h"
#include "config/system_accounts.h"
#include "config/trusted_files.h"

#if defined(_WIN32)
#include <ws2tcpip.h>  // inet_pton
#else
#include <arpa/inet.h>
#endif

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace csi_proxy::host {
namespace {

namespace fs = std::filesystem;

// The keys of a [groups.<name>] table that the host consumes; every other key is the library's.
const std::set<std::string> kGroupHostKeys = {"enabled",
                                              "required",
                                              "library",
                                              "versions",
                                              "workers",
                                              "max_queued_calls",
                                              "max_request_bytes",
                                              "allowed_uids",
                                              "allowed_gids",
                                              "read_only_uids",
                                              "read_only_gids",
                                              "isolation",
                                              "restart_limit",
                                              "restart_window_seconds",
                                              "hang_restart_seconds"};

// The host's keys that confine an isolated group's runner (config/group_privileges.h).
const std::vector<std::string> kPrivilegeKeys = {"capabilities",     "user",           "group",
                                                 "max_memory_bytes", "max_open_files", "max_tasks"};

bool IsGroupHostKey(const std::string& key) {
  return kGroupHostKeys.count(key) > 0 ||
         std::find(kPrivilegeKeys.begin(), kPrivilegeKeys.end(), key) != kPrivilegeKeys.end();
}

std::string Where(const std::string& source, const toml::node& node) {
  const auto& begin = node.source().begin;
  return source + ":" + std::to_string(begin.line);
}

Status KeyError(const std::string& source, const toml::node& node, const std::string& key, const std::string& what) {
  return InvalidArgument(Where(source, node) + ": " + key + " " + what);
}

Status ReadString(const std::string& source, const toml::table& t, const std::string& table_name,
                  const std::string& key, std::string& out) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return Status::Ok();
  auto v = n->value_exact<std::string>();
  if (!v) return KeyError(source, *n, table_name + "." + key, "must be a string");
  out = *v;
  return Status::Ok();
}

Status ReadBool(const std::string& source, const toml::table& t, const std::string& table_name, const std::string& key,
                bool& out) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return Status::Ok();
  auto v = n->value_exact<bool>();
  if (!v) return KeyError(source, *n, table_name + "." + key, "must be true or false");
  out = *v;
  return Status::Ok();
}

Status ReadInt(const std::string& source, const toml::table& t, const std::string& table_name, const std::string& key,
               int64_t min, int64_t max, int& out) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return Status::Ok();
  auto v = n->value_exact<int64_t>();
  if (!v || *v < min || *v > max) {
    return KeyError(source, *n, table_name + "." + key,
                    "must be an integer from " + std::to_string(min) + " to " + std::to_string(max));
  }
  out = static_cast<int>(*v);
  return Status::Ok();
}

Status ReadStringArray(const std::string& source, const toml::table& t, const std::string& table_name,
                       const std::string& key, std::vector<std::string>& out) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return Status::Ok();
  const toml::array* arr = n->as_array();
  if (arr == nullptr) return KeyError(source, *n, table_name + "." + key, "must be an array of strings");
  out.clear();
  for (const auto& item : *arr) {
    auto v = item.value_exact<std::string>();
    if (!v) return KeyError(source, item, table_name + "." + key, "must be an array of strings");
    out.push_back(*v);
  }
  return Status::Ok();
}

// An array of uids or gids: integers, or user or group names resolved now (at start and at each reload).
Status ReadIdArray(const std::string& source, const toml::table& t, const std::string& table_name,
                   const std::string& key, std::optional<std::vector<AccountId>>& out) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return Status::Ok();
  const bool uids = key.find("uids") != std::string::npos;
  const std::string what = uids ? "uids or user names" : "gids or group names";
  const toml::array* arr = n->as_array();
  if (arr == nullptr) return KeyError(source, *n, table_name + "." + key, "must be an array of " + what);
  std::vector<AccountId> ids;
  for (const auto& item : *arr) {
    if (auto i = item.value_exact<int64_t>()) {
      auto id = AccountFromNumber(*i);
      if (!id.ok()) {
        return KeyError(source, item, table_name + "." + key,
                        "holds " + std::to_string(*i) + ", " + id.status().message());
      }
      ids.push_back(*id);
    } else if (auto name = item.value_exact<std::string>(); name && !name->empty()) {
      auto id = uids ? ResolveUser(*name) : ResolveGroup(*name);
      if (!id.ok()) {
        return KeyError(source, item, table_name + "." + key,
                        id.status().code() == Code::kNotFound
                            ? "holds '" + *name + "', which is not a known " + (uids ? "user" : "group")
                            : "holds " + id.status().message());
      }
      ids.push_back(*id);
    } else {
      return KeyError(source, item, table_name + "." + key, "must be an array of " + what);
    }
  }
  out = std::move(ids);
  return Status::Ok();
}

// A resource limit: 0 (the host's own limit) or an integer from `min` to `max`.
Status ReadLimit(const std::string& source, const toml::table& t, const std::string& table_name, const std::string& key,
                 int64_t min, int64_t max, uint64_t& out) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return Status::Ok();
  auto v = n->value_exact<int64_t>();
  if (!v || (*v != 0 && (*v < min || *v > max))) {
    return KeyError(
        source, *n, table_name + "." + key,
        "must be 0 (the host's own limit) or an integer from " + std::to_string(min) + " to " + std::to_string(max));
  }
  out = static_cast<uint64_t>(*v);
  return Status::Ok();
}

// The account a runner switches to: a uid or gid, or a user or group name resolved now.
Status ReadAccount(const std::string& source, const toml::table& t, const std::string& table_name,
                   const std::string& key, std::optional<AccountId>& out, std::string& name_out) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return Status::Ok();
  const bool user = key == "user";
  const std::string full = table_name + "." + key;
  StatusOr<AccountId> id = InvalidArgument("");
  if (auto i = n->value_exact<int64_t>()) {
    id = AccountFromNumber(*i);
    if (!id.ok()) return KeyError(source, *n, full, "is " + std::to_string(*i) + ", " + id.status().message());
    name_out = std::to_string(*i);
  } else if (auto name = n->value_exact<std::string>(); name && !name->empty()) {
    id = user ? ResolveUser(*name) : ResolveGroup(*name);
    if (!id.ok()) {
      return KeyError(source, *n, full,
                      id.status().code() == Code::kNotFound
                          ? "is '" + *name + "', which is not a known " + (user ? "user" : "group")
                          : "is " + id.status().message());
    }
    name_out = *name;
  } else {
    return KeyError(source, *n, full, user ? "must be a user name or uid" : "must be a group name or gid");
  }
  out = *id;
  return Status::Ok();
}

// The privilege keys over the defaults of the table's name.
Status ReadPrivileges(const std::string& source, const toml::table& t, const std::string& table_name, GroupConfig& g) {
  GroupPrivileges& p = g.privileges;
  p = DefaultGroupPrivileges(g.name);
  for (const std::string& key : kPrivilegeKeys) {  // the first in the file, for the message
    const toml::node* n = t.get(key);
    const int line = n == nullptr ? 0 : static_cast<int>(n->source().begin.line);
    if (n != nullptr && (g.privilege_key.empty() || line < g.privilege_key_line)) {
      g.privilege_key = table_name + "." + key;
      g.privilege_key_line = line;
    }
  }
  if (const toml::node* n = t.get("capabilities")) {
    const std::string full = table_name + ".capabilities";
    const toml::array* arr = n->as_array();
    if (arr == nullptr) {
      return KeyError(source, *n, full, "must be an array of capability names such as \"CAP_SYS_ADMIN\"");
    }
    p.capabilities.clear();
    for (const auto& item : *arr) {
      auto name = item.value_exact<std::string>();
      if (!name) return KeyError(source, item, full, "must be an array of capability names such as \"CAP_SYS_ADMIN\"");
      auto capability = CapabilityFromName(*name);
      if (!capability) {
        return KeyError(source, item, full,
                        "holds '" + *name +
                            "', which is not a Linux capability (names are written as in capabilities(7): "
                            "CAP_SYS_ADMIN, CAP_DAC_OVERRIDE, ...)");
      }
      p.capabilities.push_back(*capability);
    }
    std::sort(p.capabilities.begin(), p.capabilities.end());
    p.capabilities.erase(std::unique(p.capabilities.begin(), p.capabilities.end()), p.capabilities.end());
  }
  CSI_PROXY_RETURN_IF_ERROR(ReadAccount(source, t, table_name, "user", p.user, p.user_name));
  CSI_PROXY_RETURN_IF_ERROR(ReadAccount(source, t, table_name, "group", p.group, p.group_name));
  if (p.user && !p.group) {
    auto primary = PrimaryGroupOf(*p.user);
    if (!primary.ok()) {
      return KeyError(source, *t.get("user"), table_name + ".user",
                      "has no primary group to run as (" + primary.status().message() + "); set " + table_name +
                          ".group beside it");
    }
    p.group = *primary;
  }
  CSI_PROXY_RETURN_IF_ERROR(
      ReadLimit(source, t, table_name, "max_memory_bytes", 16 << 20, int64_t{1} << 50, p.max_memory_bytes));
  CSI_PROXY_RETURN_IF_ERROR(ReadLimit(source, t, table_name, "max_open_files", 16, 1 << 20, p.max_open_files));
  return ReadLimit(source, t, table_name, "max_tasks", 1, 1 << 22, p.max_tasks);
}

Status ReadAccessLists(const std::string& source, const toml::table& t, const std::string& table_name,
                       AccessLists& out) {
  CSI_PROXY_RETURN_IF_ERROR(ReadIdArray(source, t, table_name, "allowed_uids", out.allowed_uids));
  CSI_PROXY_RETURN_IF_ERROR(ReadIdArray(source, t, table_name, "allowed_gids", out.allowed_gids));
  CSI_PROXY_RETURN_IF_ERROR(ReadIdArray(source, t, table_name, "read_only_uids", out.read_only_uids));
  return ReadIdArray(source, t, table_name, "read_only_gids", out.read_only_gids);
}

}  // namespace

bool IsValidMetricsAddress(const std::string& address) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 >= address.size() || address.size() - colon > 6) return false;
  std::string port = address.substr(colon + 1);
  if (port.find_first_not_of("0123456789") != std::string::npos) return false;
  if (int number = std::stoi(port); number < 1 || number > 65535) return false;
  // An address literal: the web server resolves no names.
  std::string host = address.substr(0, colon);
  unsigned char buf[sizeof(in6_addr)];
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    return inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), buf) == 1;
  }
  return inet_pton(AF_INET, host.c_str(), buf) == 1;
}

namespace {

// Reads `key` of [host] into `c`, by its rule; an absent key leaves the default.
Status ReadHostKey(const std::string& source, const toml::table& t, const HostKey& key, HostConfig& c) {
  const std::string name(key.name);
  const toml::node* n = t.get(name);
  if (n == nullptr) return Status::Ok();
  const std::string full = "host." + name;
  switch (key.rule) {
    case HostKeyRule::kAbsolutePath:
    case HostKeyRule::kAbsolutePathIfSet:
    case HostKeyRule::kAbsolutePathOrStderr: {
      std::string& value = c.*std::get<std::string HostConfig::*>(key.field);
      CSI_PROXY_RETURN_IF_ERROR(ReadString(source, t, "host", name, value));
      bool ok = IsAbsolutePath(value) || (key.rule == HostKeyRule::kAbsolutePathIfSet && value.empty()) ||
                (key.rule == HostKeyRule::kAbsolutePathOrStderr && (value.empty() || value == "-"));
      if (!ok) return KeyError(source, *n, full, "must be an absolute path, not '" + value + "'");
      return Status::Ok();
    }
    case HostKeyRule::kAbsolutePaths: {
      std::vector<std::string>& value = c.*std::get<std::vector<std::string> HostConfig::*>(key.field);
      CSI_PROXY_RETURN_IF_ERROR(ReadStringArray(source, t, "host", name, value));
      for (const auto& dir : value) {
        if (!IsAbsolutePath(dir)) return KeyError(source, *n, full, "must hold absolute paths, not '" + dir + "'");
      }
      return Status::Ok();
    }
    case HostKeyRule::kLogLevel: {
      std::string& value = c.*std::get<std::string HostConfig::*>(key.field);
      CSI_PROXY_RETURN_IF_ERROR(ReadString(source, t, "host", name, value));
      if (!IsValidLogLevel(value)) {
        return KeyError(source, *n, full,
                        "must be one of trace, debug, info, warn (or warning), error, not '" + value + "'");
      }
      return Status::Ok();
    }
    case HostKeyRule::kLogFormat: {
      std::string& value = c.*std::get<std::string HostConfig::*>(key.field);
      CSI_PROXY_RETURN_IF_ERROR(ReadString(source, t, "host", name, value));
      if (value != "text" && value != "json")
        return KeyError(source, *n, full, "must be text or json, not '" + value + "'");
      return Status::Ok();
    }
    case HostKeyRule::kAuditOverflow: {
      std::string& value = c.*std::get<std::string HostConfig::*>(key.field);
      CSI_PROXY_RETURN_IF_ERROR(ReadString(source, t, "host", name, value));
      if (value != "drop" && value != "refuse")
        return KeyError(source, *n, full, "must be drop or refuse, not '" + value + "'");
      return Status::Ok();
    }
    case HostKeyRule::kBool:
      return ReadBool(source, t, "host", name, c.*std::get<bool HostConfig::*>(key.field));
    case HostKeyRule::kInteger:
      return ReadInt(source, t, "host", name, key.min, key.max, c.*std::get<int HostConfig::*>(key.field));
    case HostKeyRule::kSeconds: {
      auto v = n->value_exact<int64_t>();
      if (!v || *v < key.min || *v > key.max) {
        return KeyError(source, *n, full,
                        "must be an integer from " + std::to_string(key.min) + " to " + std::to_string(key.max));
      }
      std::visit(
          [&](auto member) {
            if constexpr (std::is_same_v<decltype(member), std::chrono::seconds HostConfig::*> ||
                          std::is_same_v<decltype(member), std::chrono::milliseconds HostConfig::*>) {
              c.*member = std::chrono::seconds(*v);
            }
          },
          key.field);
      return Status::Ok();
    }
    case HostKeyRule::kOctalMode: {
      // An integer (TOML's 0o660) or an octal string ("0660").
      int64_t mode = -1;
      if (auto i = n->value_exact<int64_t>()) {
        mode = *i;
      } else if (auto s = n->value_exact<std::string>();
                 s && !s->empty() && s->size() <= 4 && s->find_first_not_of("01234567") == std::string::npos) {
        mode = std::stoll(*s, nullptr, 8);
      }
      if (mode < 0 || mode > 0777)
        return KeyError(source, *n, full, "must be an octal permission such as 0o660 or \"0660\"");
      c.*std::get<uint32_t HostConfig::*>(key.field) = static_cast<uint32_t>(mode);
      return Status::Ok();
    }
    case HostKeyRule::kSystemGroup: {
      std::string& value = c.*std::get<std::string HostConfig::*>(key.field);
      CSI_PROXY_RETURN_IF_ERROR(ReadString(source, t, "host", name, value));
      if (value.empty()) return Status::Ok();  // the group the file is created with
      auto gid = ResolveGroup(value);
      if (!gid.ok()) return KeyError(source, *n, full, "must be a group name or gid: " + gid.status().message());
      return Status::Ok();
    }
    case HostKeyRule::kIdList:
      return ReadIdArray(source, t, "host", name,
                         c.access.*std::get<std::optional<std::vector<AccountId>> AccessLists::*>(key.field));
    case HostKeyRule::kMetricsAddress: {
      std::string& value = c.*std::get<std::string HostConfig::*>(key.field);
      CSI_PROXY_RETURN_IF_ERROR(ReadString(source, t, "host", name, value));
      if (!value.empty() && !IsValidMetricsAddress(value)) {
        return KeyError(source, *n, full,
                        "must be IP:PORT (\"127.0.0.1:9180\", \"[::1]:9180\"), not '" + value +
                            "' (no host names; no Unix socket: Debian's civetweb is built without them)");
      }
      return Status::Ok();
    }
    case HostKeyRule::kSecurityDescriptor: {
      std::string& value = c.*std::get<std::string HostConfig::*>(key.field);
      CSI_PROXY_RETURN_IF_ERROR(ReadString(source, t, "host", name, value));
      if (Status valid = CheckSecurityDescriptor(value); !valid.ok()) {
        return KeyError(source, *n, full, "must be a security descriptor in SDDL: " + valid.message());
      }
      return Status::Ok();
    }
  }
  return Status::Ok();
}

Status ParseHostTable(const std::string& source, const toml::table& t, HostConfig& c) {
  const auto keys = HostKeys();
  for (const auto& [key, node] : t) {
    const std::string_view name = key.str();
    if (std::none_of(keys.begin(), keys.end(), [name](const HostKey& k) { return k.name == name; })) {
      if (const HostKey* other = OtherSystemHostKey(name)) {
        return KeyError(source, node, "host." + std::string(name),
                        std::string("has a meaning on ") +
                            (other->system == HostKeySystem::kWindows ? "Windows" : "Linux") + " only");
      }
      return KeyError(source, node, "host." + std::string(name), "is not a known key");
    }
  }
  for (const HostKey& key : HostKeys()) CSI_PROXY_RETURN_IF_ERROR(ReadHostKey(source, t, key, c));
  return Status::Ok();
}

bool IsValidVersion(const std::string& v) {
  // v<N>[alpha<N>|beta<N>], as upstream versions are named.
  size_t i = 0;
  if (v.size() < 2 || v[i++] != 'v' || v[i] < '1' || v[i] > '9') return false;
  while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i]))) ++i;
  if (i == v.size()) return true;
  for (const std::string q : {"alpha", "beta"}) {
    if (v.compare(i, q.size(), q) == 0) {
      size_t j = i + q.size();
      if (j == v.size() || v[j] < '1' || v[j] > '9') return false;
      while (j < v.size() && std::isdigit(static_cast<unsigned char>(v[j]))) ++j;
      return j == v.size();
    }
  }
  return false;
}

Status ParseGroup(const std::string& source, const std::string& name, const toml::node& node, const HostConfig& host,
                  GroupConfig& g) {
  const toml::table* t = node.as_table();
  if (t == nullptr) return KeyError(source, node, "groups." + name, "must be a table");
  if (!IsValidGroupName(name)) {
    return KeyError(source, node, "groups." + name, std::string("is not ") + kGroupNameRule);
  }
  const std::string table_name = "groups." + name;
  g.name = name;
  g.source = source;
  CSI_PROXY_RETURN_IF_ERROR(ReadBool(source, *t, table_name, "enabled", g.enabled));
  CSI_PROXY_RETURN_IF_ERROR(ReadBool(source, *t, table_name, "required", g.required));
  CSI_PROXY_RETURN_IF_ERROR(ReadString(source, *t, table_name, "library", g.library));
  CSI_PROXY_RETURN_IF_ERROR(ReadStringArray(source, *t, table_name, "versions", g.versions));
  for (const auto& v : g.versions) {
    if (!IsValidVersion(v)) {
      return KeyError(source, *t->get("versions"), table_name + ".versions",
                      "holds '" + v + "', not a version like v1 or v1alpha2");
    }
  }
  if (g.library.empty()) {
    g.library = (fs::path(host.plugin_dir) / GroupLibraryFileName(name)).string();
  } else if (!fs::path(g.library).is_absolute()) {
    g.library = (fs::path(host.plugin_dir) / g.library).string();  // a bare file name lives in plugin_dir
  }
  CSI_PROXY_RETURN_IF_ERROR(ReadInt(source, *t, table_name, "workers", 1, 1024, g.workers));
  CSI_PROXY_RETURN_IF_ERROR(ReadInt(source, *t, table_name, "max_queued_calls", 0, 100000, g.max_queued_calls));
  CSI_PROXY_RETURN_IF_ERROR(
      ReadInt(source, *t, table_name, "max_request_bytes", 1024, 16 * 1024 * 1024, g.max_request_bytes));
  CSI_PROXY_RETURN_IF_ERROR(ReadAccessLists(source, *t, table_name, g.access));
  std::string isolation = IsolationName(g.isolation);
  CSI_PROXY_RETURN_IF_ERROR(ReadString(source, *t, table_name, "isolation", isolation));
  if (isolation == IsolationName(Isolation::kProcess)) {
    g.isolation = Isolation::kProcess;
  } else if (isolation != IsolationName(Isolation::kInProcess)) {
    return KeyError(source, *t->get("isolation"), table_name + ".isolation",
                    "holds '" + isolation + "'; it must be \"in-process\" or \"process\"");
  }
  CSI_PROXY_RETURN_IF_ERROR(ReadInt(source, *t, table_name, "restart_limit", 0, 1000, g.restart_limit));
  CSI_PROXY_RETURN_IF_ERROR(
      ReadInt(source, *t, table_name, "restart_window_seconds", 1, 86400, g.restart_window_seconds));
  CSI_PROXY_RETURN_IF_ERROR(ReadInt(source, *t, table_name, "hang_restart_seconds", 0, 86400, g.hang_restart_seconds));
  g.table = *t;
  CSI_PROXY_RETURN_IF_ERROR(ReadPrivileges(source, *t, table_name, g));
  CSI_PROXY_RETURN_IF_ERROR(RefuseUnappliedPrivileges(g, g.isolation == Isolation::kProcess));
  for (const auto& [key, value] : *t) {
    std::string k(key.str());
    if (IsGroupHostKey(k)) continue;
    g.settings.insert(k, value);
    g.key_lines[k] = static_cast<int>(value.source().begin.line);
  }
  return Status::Ok();
}

}  // namespace

const char* IsolationName(Isolation isolation) { return isolation == Isolation::kProcess ? "process" : "in-process"; }

bool IsValidGroupName(std::string_view name) {
  if (name.empty() || name.size() > CSI_PROXY_GROUP_NAME_MAX) return false;
  for (char ch : name) {
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9'))) return false;
  }
  return name[0] >= 'a' && name[0] <= 'z';
}

Status RefuseUnappliedPrivileges(const GroupConfig& group, bool isolated) {
  if (isolated || group.privilege_key.empty()) return Status::Ok();
  return InvalidArgument(group.source + ":" + std::to_string(group.privilege_key_line) + ": " + group.privilege_key +
                         " confines a group's runner, and [groups." + group.name +
                         "] runs in the host's process with the host's privileges; set isolation = \"process\" "
                         "or remove the key");
}

const std::vector<std::string>& GroupHostKeys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> all(kGroupHostKeys.begin(), kGroupHostKeys.end());
    all.insert(all.end(), kPrivilegeKeys.begin(), kPrivilegeKeys.end());
    return all;
  }();
  return keys;
}

bool IsValidLogLevel(const std::string& level) {
  // The names the log prints (spdlog writes "warning") and the short ones.
  return level == "trace" || level == "debug" || level == "info" || level == "warn" || level == "warning" ||
         level == "error";
}

StatusOr<HostConfig> ParseConfig(std::string_view text, const std::string& source_name,
                                 const std::string& executable_dir) {
  toml::table root;
  try {
    root = toml::parse(text, source_name);
  } catch (const toml::parse_error& err) {
    return InvalidArgument(source_name + ":" + std::to_string(err.source().begin.line) + ": " +
                           std::string(err.description()));
  }
  HostConfig config;
  for (const auto& [key, node] : root) {
    std::string k(key.str());
    if (k != "host" && k != "groups") {
      return KeyError(source_name, node, k, "is not a known table (expected [host] or [groups.<name>])");
    }
  }
  if (const toml::node* host = root.get("host")) {
    if (!host->is_table()) return KeyError(source_name, *host, "host", "must be a table");
    CSI_PROXY_RETURN_IF_ERROR(ParseHostTable(source_name, *host->as_table(), config));
  }
  if (config.admin_socket.empty()) config.admin_socket = DefaultAdminSocket(config.endpoint_dir);
  if (config.plugin_dir.empty()) config.plugin_dir = DefaultPluginDir(executable_dir);
  if (const toml::node* groups = root.get("groups")) {
    const toml::table* gt = groups->as_table();
    if (gt == nullptr) return KeyError(source_name, *groups, "groups", "must be a table of [groups.<name>] tables");
    for (const auto& [key, node] : *gt) {
      GroupConfig g;
      CSI_PROXY_RETURN_IF_ERROR(ParseGroup(source_name, std::string(key.str()), node, config, g));
      config.groups.push_back(std::move(g));
    }
  }
  // One file, one group: a library loaded under two tables would serve the same endpoints twice.
  std::map<std::string, const GroupConfig*> by_library;
  for (const auto& g : config.groups) {
    if (!g.enabled) continue;
    std::string file = fs::weakly_canonical(g.library).string();
    auto [it, fresh] = by_library.emplace(file, &g);
    if (!fresh) {
      const toml::node* node = root["groups"][g.name].node();
      return KeyError(source_name, *node, "groups." + g.name,
                      "loads " + file + ", which [groups." + it->second->name +
                          "] loads already; one library serves "
                          "one group table");
    }
  }
  return config;
}

StatusOr<HostConfig> LoadConfig(const std::string& path, const std::string& executable_dir) {
  // The text parsed is read from the file the checks opened, so a path swapped after them is never read.
  CSI_PROXY_ASSIGN_OR_RETURN(TrustedFile file, OpenTrustedFile(path, "the configuration file"));
  CSI_PROXY_ASSIGN_OR_RETURN(std::string text, file.ReadAll(kMaxConfigBytes));
  return ParseConfig(text, path, executable_dir);
}

}  // namespace csi_proxy::host

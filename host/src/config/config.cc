// Parses and validates the host configuration; every error names the key and the line it is on.
#include "config/config.h"

#include "config/system_accounts.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace csi_proxy::host {
namespace {

namespace fs = std::filesystem;

// The keys of a [groups.<name>] table that the host consumes; every other key is the library's.
const std::set<std::string> kGroupHostKeys = {"enabled",      "required",         "library",           "versions",
                                              "workers",      "max_queued_calls", "max_request_bytes", "allowed_uids",
                                              "allowed_gids", "read_only_uids",   "read_only_gids"};

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
                   const std::string& key, std::optional<std::vector<uint32_t>>& out) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return Status::Ok();
  const bool uids = key.find("uids") != std::string::npos;
  const std::string what = uids ? "uids or user names" : "gids or group names";
  const toml::array* arr = n->as_array();
  if (arr == nullptr) return KeyError(source, *n, table_name + "." + key, "must be an array of " + what);
  std::vector<uint32_t> ids;
  for (const auto& item : *arr) {
    if (auto i = item.value_exact<int64_t>()) {
      // (uid_t)-1 is "no id" to the kernel, so the largest id is one less.
      if (*i < 0 || *i >= int64_t{UINT32_MAX}) {
        return KeyError(source, item, table_name + "." + key,
                        "holds " + std::to_string(*i) + ", not an id from 0 to 4294967294");
      }
      ids.push_back(static_cast<uint32_t>(*i));
    } else if (auto name = item.value_exact<std::string>(); name && !name->empty()) {
      auto id = uids ? ResolveUser(*name) : StatusOr<uint32_t>(ResolveGroup(*name));
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

Status ReadAccessLists(const std::string& source, const toml::table& t, const std::string& table_name,
                       AccessLists& out) {
  CSI_PROXY_RETURN_IF_ERROR(ReadIdArray(source, t, table_name, "allowed_uids", out.allowed_uids));
  CSI_PROXY_RETURN_IF_ERROR(ReadIdArray(source, t, table_name, "allowed_gids", out.allowed_gids));
  CSI_PROXY_RETURN_IF_ERROR(ReadIdArray(source, t, table_name, "read_only_uids", out.read_only_uids));
  return ReadIdArray(source, t, table_name, "read_only_gids", out.read_only_gids);
}

Status RequireAbsolute(const std::string& source, const toml::table& t, const std::string& key,
                       const std::string& value) {
  if (!value.empty() && value[0] == '/') return Status::Ok();
  const toml::node* n = t.get(key);
  return n != nullptr ? KeyError(source, *n, "host." + key, "must be an absolute path, not '" + value + "'")
                      : InvalidArgument(source + ": host." + key + " must be an absolute path");
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

Status ParseHostTable(const std::string& source, const toml::table& t, HostConfig& c) {
  static const std::set<std::string> kKnown = {"endpoint_dir",
                                               "admin_socket",
                                               "plugin_dir",
                                               "kubelet_path",
                                               "working_dirs",
                                               "state_dir",
                                               "log_level",
                                               "log_format",
                                               "audit_log",
                                               "workers",
                                               "socket_mode",
                                               "socket_group",
                                               "shutdown_timeout_seconds",
                                               "max_connections",
                                               "max_connections_per_uid",
                                               "max_connections_per_endpoint",
                                               "handshake_timeout_seconds",
                                               "idle_timeout_seconds",
                                               "allowed_uids",
                                               "allowed_gids",
                                               "read_only_uids",
                                               "read_only_gids",
                                               "metrics_address"};
  for (const auto& [key, node] : t) {
    if (!kKnown.count(std::string(key.str()))) {
      return KeyError(source, node, "host." + std::string(key.str()), "is not a known key");
    }
  }
  CSI_PROXY_RETURN_IF_ERROR(ReadString(source, t, "host", "endpoint_dir", c.endpoint_dir));
  CSI_PROXY_RETURN_IF_ERROR(ReadString(source, t, "host", "admin_socket", c.admin_socket));
  CSI_PROXY_RETURN_IF_ERROR(ReadString(source, t, "host", "plugin_dir", c.plugin_dir));
  CSI_PROXY_RETURN_IF_ERROR(ReadString(source, t, "host", "kubelet_path", c.kubelet_path));
  CSI_PROXY_RETURN_IF_ERROR(ReadStringArray(source, t, "host", "working_dirs", c.working_dirs));
  CSI_PROXY_RETURN_IF_ERROR(ReadString(source, t, "host", "state_dir", c.state_dir));
  CSI_PROXY_RETURN_IF_ERROR(ReadString(source, t, "host", "log_level", c.log_level));
  CSI_PROXY_RETURN_IF_ERROR(ReadString(source, t, "host", "log_format", c.log_format));
  CSI_PROXY_RETURN_IF_ERROR(ReadString(source, t, "host", "audit_log", c.audit_log));
  CSI_PROXY_RETURN_IF_ERROR(ReadString(source, t, "host", "socket_group", c.socket_group));
  CSI_PROXY_RETURN_IF_ERROR(ReadAccessLists(source, t, "host", c.access));
  CSI_PROXY_RETURN_IF_ERROR(ReadString(source, t, "host", "metrics_address", c.metrics_address));
  if (!c.metrics_address.empty() && !IsValidMetricsAddress(c.metrics_address)) {
    return KeyError(source, *t.get("metrics_address"), "host.metrics_address",
                    "must be IP:PORT (\"127.0.0.1:9180\", \"[::1]:9180\"), not '" + c.metrics_address +
                        "' (no host names; no Unix socket: Debian's civetweb is built without them)");
  }

  for (const char* key : {"endpoint_dir", "kubelet_path", "state_dir"}) {
    std::string value = key == std::string("endpoint_dir")   ? c.endpoint_dir
                        : key == std::string("kubelet_path") ? c.kubelet_path
                                                             : c.state_dir;
    CSI_PROXY_RETURN_IF_ERROR(RequireAbsolute(source, t, key, value));
  }
  if (!c.plugin_dir.empty()) CSI_PROXY_RETURN_IF_ERROR(RequireAbsolute(source, t, "plugin_dir", c.plugin_dir));
  if (!c.admin_socket.empty()) CSI_PROXY_RETURN_IF_ERROR(RequireAbsolute(source, t, "admin_socket", c.admin_socket));
  if (!c.audit_log.empty() && c.audit_log != "-") {
    CSI_PROXY_RETURN_IF_ERROR(RequireAbsolute(source, t, "audit_log", c.audit_log));
  }
  if (c.log_format != "text" && c.log_format != "json") {
    return KeyError(source, *t.get("log_format"), "host.log_format",
                    "must be text or json, not '" + c.log_format + "'");
  }
  for (const auto& dir : c.working_dirs) {
    if (dir.empty() || dir[0] != '/') {
      return KeyError(source, *t.get("working_dirs"), "host.working_dirs",
                      "must hold absolute paths, not '" + dir + "'");
    }
  }
  if (const toml::node* n = t.get("socket_group")) {
    auto gid = ResolveGroup(c.socket_group);
    if (!gid.ok()) {
      return KeyError(source, *n, "host.socket_group", "must be a group name or gid: " + gid.status().message());
    }
  }
  if (!IsValidLogLevel(c.log_level)) {
    return KeyError(source, *t.get("log_level"), "host.log_level",
                    "must be one of trace, debug, info, warn (or warning), error, not '" + c.log_level + "'");
  }
  CSI_PROXY_RETURN_IF_ERROR(ReadInt(source, t, "host", "workers", 1, 1024, c.workers));
  CSI_PROXY_RETURN_IF_ERROR(ReadInt(source, t, "host", "max_connections", 16, 1000000, c.max_connections));
  CSI_PROXY_RETURN_IF_ERROR(
      ReadInt(source, t, "host", "max_connections_per_uid", 1, 1000000, c.max_connections_per_uid));
  CSI_PROXY_RETURN_IF_ERROR(
      ReadInt(source, t, "host", "max_connections_per_endpoint", 1, 1000000, c.max_connections_per_endpoint));
  int handshake = static_cast<int>(c.handshake_timeout.count());
  CSI_PROXY_RETURN_IF_ERROR(ReadInt(source, t, "host", "handshake_timeout_seconds", 1, 3600, handshake));
  c.handshake_timeout = std::chrono::seconds(handshake);
  int idle = static_cast<int>(c.idle_timeout.count());
  CSI_PROXY_RETURN_IF_ERROR(ReadInt(source, t, "host", "idle_timeout_seconds", 1, 7 * 24 * 3600, idle));
  c.idle_timeout = std::chrono::seconds(idle);
  if (const toml::node* n = t.get("shutdown_timeout_seconds")) {
    auto v = n->value_exact<int64_t>();
    if (!v || *v < 0 || *v > 3600) {
      return KeyError(source, *n, "host.shutdown_timeout_seconds", "must be an integer from 0 to 3600");
    }
    c.shutdown_timeout = std::chrono::seconds(*v);
  }
  if (const toml::node* n = t.get("socket_mode")) {
    // An integer (TOML's 0o660) or an octal string ("0660").
    int64_t mode = -1;
    if (auto i = n->value_exact<int64_t>()) {
      mode = *i;
    } else if (auto s = n->value_exact<std::string>();
               s && !s->empty() && s->size() <= 4 && s->find_first_not_of("01234567") == std::string::npos) {
      mode = std::stoll(*s, nullptr, 8);
    }
    if (mode < 0 || mode > 0777) {
      return KeyError(source, *n, "host.socket_mode", "must be an octal permission such as 0o660 or \"0660\"");
    }
    c.socket_mode = static_cast<uint32_t>(mode);
  }
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
    g.library = host.plugin_dir + "/libcsi-proxy-" + name + ".so";
  } else if (g.library[0] != '/') {
    g.library = host.plugin_dir + "/" + g.library;  // a bare file name lives in plugin_dir
  }
  CSI_PROXY_RETURN_IF_ERROR(ReadInt(source, *t, table_name, "workers", 1, 1024, g.workers));
  CSI_PROXY_RETURN_IF_ERROR(ReadInt(source, *t, table_name, "max_queued_calls", 0, 100000, g.max_queued_calls));
  CSI_PROXY_RETURN_IF_ERROR(
      ReadInt(source, *t, table_name, "max_request_bytes", 1024, 16 * 1024 * 1024, g.max_request_bytes));
  CSI_PROXY_RETURN_IF_ERROR(ReadAccessLists(source, *t, table_name, g.access));
  for (const auto& [key, value] : *t) {
    std::string k(key.str());
    if (kGroupHostKeys.count(k)) continue;
    g.settings.insert(k, value);
    g.key_lines[k] = static_cast<int>(value.source().begin.line);
  }
  return Status::Ok();
}

}  // namespace

bool IsValidGroupName(std::string_view name) {
  if (name.empty() || name.size() > CSI_PROXY_GROUP_NAME_MAX) return false;
  for (char ch : name) {
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9'))) return false;
  }
  return name[0] >= 'a' && name[0] <= 'z';
}

const std::vector<std::string>& GroupHostKeys() {
  static const std::vector<std::string> keys(kGroupHostKeys.begin(), kGroupHostKeys.end());
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
  if (config.admin_socket.empty()) {
    std::string dir = config.endpoint_dir;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    config.admin_socket = dir + "-admin.sock";
  }
  if (config.plugin_dir.empty()) {
    config.plugin_dir = (fs::path(executable_dir) / ".." / "lib" / "csi-proxy" / "plugins").lexically_normal();
    if (config.plugin_dir.size() > 1 && config.plugin_dir.back() == '/') config.plugin_dir.pop_back();
  }
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
  // Close-on-exec: a reload reads the file while group libraries may be starting programs.
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NotFound("cannot read configuration file " + path + ": " + std::strerror(errno));
  std::string text;
  char buf[8192];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0) text.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return ParseConfig(text, path, executable_dir);
}

std::string DefaultConfigPath(const std::string& executable_dir) {
  fs::path prefix = fs::path(executable_dir).parent_path();
  fs::path etc = prefix == "/usr" ? fs::path("/etc") : prefix / "etc";
  return (etc / "csi-proxy" / "csi-proxy.toml").string();
}

}  // namespace csi_proxy::host

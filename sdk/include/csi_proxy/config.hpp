// csi_proxy/config.hpp: the configuration the host hands a group library (the C ABI's config_toml): node-wide
// settings ([host]) and the group's own keys ([groups.<name>] of the host configuration).
//
// Every error about a group key quotes the key ('port'): the host then adds the file and line of that key to the
// refusal ("/etc/csi-proxy/csi-proxy.toml:12: groups.smb.port: group key 'port' must be an integer from 1 to
// 65535, not 0"). The getters below do; a group's own rule says so with KeyError().
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <toml++/toml.h>

#include "csi_proxy/status.hpp"

namespace csi_proxy::sdk {

// The inclusive bounds of an integer key.
struct IntRange {
  int64_t min = 0;
  int64_t max = 0;
};

class PluginConfig {
 public:
  static StatusOr<PluginConfig> Parse(std::string_view toml_text) {
    PluginConfig config;
    try {
      config.doc_ = toml::parse(toml_text, std::string_view("group configuration"));
    } catch (const toml::parse_error& err) {
      return InvalidArgument("the host passed a malformed configuration: " + std::string(err.description()));
    }
    if (const toml::table* host = config.doc_["host"].as_table()) {
      config.group_name_ = (*host)["group_name"].value_or(std::string());
      config.kubelet_path_ = (*host)["kubelet_path"].value_or(std::string("/var/lib/kubelet"));
      config.state_dir_ = (*host)["state_dir"].value_or(std::string("/var/lib/csi-proxy"));
      if (const toml::array* dirs = (*host)["working_dirs"].as_array()) {
        for (const auto& d : *dirs) {
          if (auto s = d.value<std::string>()) config.working_dirs_.push_back(*s);
        }
      }
    }
    return config;
  }

  // The name of the group's table in the host configuration ([groups.<name>]).
  const std::string& group_name() const { return group_name_; }

  // Node-wide: the kubelet root and the admin's extra allowed roots.
  const std::string& kubelet_path() const { return kubelet_path_; }
  const std::vector<std::string>& working_dirs() const { return working_dirs_; }
  // Where groups keep state that must survive a restart (each group uses a subdirectory named after itself).
  const std::string& state_dir() const { return state_dir_; }

  // The group's own keys ([groups.<name>] in the host configuration).
  const toml::table& group_table() const {
    static const toml::table empty;
    const toml::table* t = doc_["group"].as_table();
    return t != nullptr ? *t : empty;
  }
  bool Has(std::string_view key) const { return group_table().contains(key); }

  // Refuses a key the group does not know, so that a typo in the configuration is reported, not ignored:
  // INVALID_ARGUMENT "unknown key 'x' in [groups.<name>]; known keys: a, b".
  Status RequireKnownKeys(std::initializer_list<std::string_view> known) const {
    return RequireKnownKeys(std::vector<std::string_view>(known));
  }
  // The same with a list made at run time (a group whose keys depend on the system it runs on).
  Status RequireKnownKeys(const std::vector<std::string_view>& known) const {
    for (const auto& [key, value] : group_table()) {
      if (std::find(known.begin(), known.end(), key.str()) != known.end()) continue;
      std::string list;
      for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      return InvalidArgument("unknown key '" + std::string(key.str()) + "' in [groups." + group_name_ + "]; " +
                             (known.size() == 0 ? std::string("the group has no keys") : "known keys: " + list));
    }
    return Status::Ok();
  }

  // INVALID_ARGUMENT "group key '<key>' <rule>": a group's own rule about one of its keys, quoting the key so that
  // the host locates it in the file. `rule` says what the key must be ("must be a GPT type GUID such as ...").
  static Status KeyError(std::string_view key, std::string_view rule) {
    return InvalidArgument("group key '" + std::string(key) + "' " + std::string(rule));
  }
  // A value for a message: in double quotes, control characters replaced, at most 100 characters.
  static std::string QuoteValue(std::string_view value) {
    std::string out = "\"";
    for (char c : value.substr(0, 100)) out += static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? '?' : c;
    return out + (value.size() > 100 ? "...\"" : "\"");
  }

  // Typed lookups of the group's own keys: the fallback when the key is absent; a key of the wrong type, or
  // outside its range or choices, is INVALID_ARGUMENT quoting it.
  StatusOr<std::string> GetString(std::string_view key, std::string fallback) const {
    return Get<std::string>(key, std::move(fallback), "a string");
  }
  StatusOr<bool> GetBool(std::string_view key, bool fallback) const { return Get<bool>(key, fallback, "a boolean"); }
  StatusOr<int64_t> GetInt(std::string_view key, int64_t fallback) const {
    return Get<int64_t>(key, fallback, "an integer");
  }
  // An integer from range.min to range.max: "group key 'port' must be an integer from 1 to 65535, not 0".
  StatusOr<int64_t> GetInt(std::string_view key, int64_t fallback, IntRange range) const {
    CSI_PROXY_ASSIGN_OR_RETURN(int64_t value, GetInt(key, fallback));
    if (value < range.min || value > range.max) {
      return KeyError(key, "must be an integer from " + std::to_string(range.min) + " to " + std::to_string(range.max) +
                               ", not " + std::to_string(value));
    }
    return value;
  }
  // One of `choices`: "group key 'default_fs_type' must be one of ext4, xfs, not "btrfs"".
  StatusOr<std::string> GetChoice(std::string_view key, std::string fallback,
                                  const std::vector<std::string_view>& choices) const {
    CSI_PROXY_ASSIGN_OR_RETURN(std::string value, GetString(key, std::move(fallback)));
    if (std::find(choices.begin(), choices.end(), value) != choices.end()) return value;
    std::string list;
    for (std::string_view c : choices) list += (list.empty() ? "" : ", ") + std::string(c);
    return KeyError(key, "must be one of " + list + ", not " + QuoteValue(value));
  }
  // An absolute path, or "" when `may_be_empty`: "group key 'mount_helper' must be an absolute path, not "x"".
  StatusOr<std::string> GetAbsolutePath(std::string_view key, std::string fallback, bool may_be_empty = false) const {
    auto value = GetString(key, std::move(fallback));
    if (!value.ok()) return value;
    const std::string& path = *value;
    if (path.empty() ? may_be_empty : path[0] == '/') return value;
    return KeyError(
        key, std::string("must be an absolute path") + (may_be_empty ? " or empty" : "") + ", not " + QuoteValue(path));
  }
  StatusOr<std::vector<std::string>> GetStringArray(std::string_view key,
                                                    std::vector<std::string> fallback = {}) const {
    const toml::node* node = group_table().get(key);
    if (node == nullptr) return fallback;
    const toml::array* arr = node->as_array();
    if (arr == nullptr) return KeyError(key, "must be an array of strings");
    std::vector<std::string> out;
    for (const auto& item : *arr) {
      auto s = item.value<std::string>();
      if (!s) return KeyError(key, "must be an array of strings");
      out.push_back(*s);
    }
    return out;
  }

 private:
  template <typename T>
  StatusOr<T> Get(std::string_view key, T fallback, const char* type_name) const {
    const toml::node* node = group_table().get(key);
    if (node == nullptr) return fallback;
    std::optional<T> v = node->value_exact<T>();
    if (!v) return KeyError(key, std::string("must be ") + type_name);
    return *v;
  }

  toml::table doc_;
  std::string group_name_;
  std::string kubelet_path_ = "/var/lib/kubelet";
  std::string state_dir_ = "/var/lib/csi-proxy";
  std::vector<std::string> working_dirs_;
};

}  // namespace csi_proxy::sdk

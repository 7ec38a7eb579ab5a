// See kit_config.h. The [check] table is taken out of the file and the rest goes to the host's parser, so the
// library receives exactly what a host with that file would hand it.
#include "kit_config.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace csi_proxy::plugin_check {
namespace {

namespace fs = std::filesystem;

std::string GroupFromFileName(const std::string& library) {
  std::string stem = fs::path(library).filename().string();
  for (const char* prefix : {"libcsi-proxy-", "csi-proxy-"}) {
    if (stem.rfind(prefix, 0) == 0) {
      stem = stem.substr(std::string(prefix).size());
      return stem.substr(0, stem.find('.'));
    }
  }
  return "";
}

Status CheckError(const std::string& source, const std::string& key, const std::string& problem) {
  return InvalidArgument(source + ": [check] " + key + " " + problem);
}

StatusOr<int64_t> PositiveInt(const toml::table& check, const std::string& source, const char* key, int64_t fallback,
                              int64_t max) {
  const toml::node* node = check.get(key);
  if (node == nullptr) return fallback;
  auto value = node->value<int64_t>();
  if (!node->is_integer() || !value || *value < 1 || *value > max) {
    return CheckError(source, key, "must be an integer from 1 to " + std::to_string(max));
  }
  return *value;
}

Status ReadCheckTable(const toml::table& check, const std::string& source, KitConfig& kit) {
  static const std::set<std::string> known = {
      "fuzz_mutating",        "skip",    "read_only_methods", "requests", "reloads", "rss_growth_limit_mib",
      "call_timeout_seconds", "threads", "calls_per_thread"};
  for (const auto& [key, node] : check) {
    if (known.count(std::string(key.str())) == 0) {
      return CheckError(source, std::string(key.str()), "is not a key of [check]");
    }
  }
  if (const toml::node* node = check.get("fuzz_mutating")) {
    if (!node->is_boolean()) return CheckError(source, "fuzz_mutating", "must be true or false");
    kit.fuzz_mutating = node->as_boolean()->get();
  }
  for (const char* key : {"skip", "requests"}) {
    const toml::node* node = check.get(key);
    if (node == nullptr) continue;
    if (!node->is_table()) return CheckError(source, key, "must be a table of method paths");
    for (const auto& [method, value] : *node->as_table()) {
      // skip also takes a method's name alone, for every service (version) that has it.
      const bool path = std::string(method.str()).rfind('/', 0) == 0;
      if (!value.is_string() || (!path && std::string(key) != "skip")) {
        return CheckError(source, key, "maps a method path (\"/v1.Service/Method\") to a string");
      }
      (std::string(key) == "skip" ? kit.skip : kit.requests)[std::string(method.str())] = value.as_string()->get();
    }
  }
  if (const toml::node* node = check.get("read_only_methods")) {
    const toml::array* list = node->as_array();
    if (list == nullptr) return CheckError(source, "read_only_methods", "must be an array of method paths");
    for (const auto& item : *list) {
      if (!item.is_string()) return CheckError(source, "read_only_methods", "must be an array of method paths");
      kit.read_only_methods.insert(item.as_string()->get());
    }
  }
  CSI_PROXY_ASSIGN_OR_RETURN(int64_t reloads, PositiveInt(check, source, "reloads", kit.reloads, 1000));
  CSI_PROXY_ASSIGN_OR_RETURN(int64_t growth, PositiveInt(check, source, "rss_growth_limit_mib", 16, 1 << 16));
  CSI_PROXY_ASSIGN_OR_RETURN(int64_t timeout, PositiveInt(check, source, "call_timeout_seconds", 10, 3600));
  CSI_PROXY_ASSIGN_OR_RETURN(int64_t threads, PositiveInt(check, source, "threads", kit.threads, 256));
  CSI_PROXY_ASSIGN_OR_RETURN(int64_t calls,
                             PositiveInt(check, source, "calls_per_thread", kit.calls_per_thread, 1 << 20));
  kit.reloads = static_cast<int>(reloads);
  kit.rss_growth_limit_bytes = growth << 20;
  kit.call_timeout = std::chrono::seconds(timeout);
  kit.threads = static_cast<int>(threads);
  kit.calls_per_thread = static_cast<int>(calls);
  return Status::Ok();
}

}  // namespace

StatusOr<KitConfig> LoadKitConfig(const std::string& library, const std::string& config_path,
                                  const std::string& group_name, const std::string& scratch_dir) {
  toml::table root;
  const std::string source = config_path.empty() ? "(no --config)" : config_path;
  if (!config_path.empty()) {
    std::ifstream in(config_path);
    if (!in) return NotFound("cannot read " + config_path);
    std::stringstream text;
    text << in.rdbuf();
    try {
      root = toml::parse(text.str(), config_path);
    } catch (const toml::parse_error& err) {
      return InvalidArgument(config_path + ":" + std::to_string(err.source().begin.line) + ": " +
                             std::string(err.description()));
    }
  }
  KitConfig kit;
  if (const toml::node* check = root.get("check")) {
    if (!check->is_table()) return CheckError(source, "", "must be a table");
    CSI_PROXY_RETURN_IF_ERROR(ReadCheckTable(*check->as_table(), source, kit));
    root.erase("check");
  }

  std::string group = group_name;
  if (const toml::table* groups = root["groups"].as_table(); group.empty() && groups != nullptr) {
    if (groups->size() == 1) group = std::string(groups->begin()->first.str());
    if (groups->size() > 1)
      return InvalidArgument(source + ": name one [groups.<name>] table, or the group with --group");
  }
  if (group.empty()) group = GroupFromFileName(library);
  if (group.empty()) {
    return InvalidArgument("the group of " + library +
                           " is not in its file name (libcsi-proxy-<group>.so): name it "
                           "with --group or a [groups.<name>] table in --config");
  }
  if (!root.contains("groups")) root.insert("groups", toml::table{});
  toml::table* groups = root["groups"].as_table();
  if (groups == nullptr) return InvalidArgument(source + ": groups must be a table of [groups.<name>] tables");
  if (!groups->contains(group)) groups->insert(group, toml::table{});
  toml::table* table = (*groups)[group].as_table();
  if (table == nullptr) return InvalidArgument(source + ": groups." + group + " must be a table");
  // The library under test, whatever the file says; never the host's defaults for the node's own directories.
  table->insert_or_assign("library", fs::absolute(library).lexically_normal().string());
  table->insert_or_assign("enabled", true);
  // The isolated checks serve the group in a runner, confined by the privilege keys of this table, which the host's
  // parser accepts only for such a group; the other checks load the library in the kit's child, where the key
  // changes nothing.
  table->insert_or_assign("isolation", "process");
  if (!root.contains("host")) root.insert("host", toml::table{});
  toml::table* host = root["host"].as_table();
  if (host == nullptr) return InvalidArgument(source + ": host must be a table");
  if (!host->contains("kubelet_path")) host->insert("kubelet_path", scratch_dir + "/kubelet");
  if (!host->contains("state_dir")) host->insert("state_dir", scratch_dir + "/state");

  std::ostringstream text;
  text << root;
  // An absolute directory: the default plugin_dir derived from it goes to the runner, whose parser wants one.
  CSI_PROXY_ASSIGN_OR_RETURN(host::HostConfig parsed,
                             host::ParseConfig(text.str(), source, fs::absolute(library).parent_path().string()));
  for (auto& g : parsed.groups) {
    if (g.name == group) kit.group = g;
  }
  parsed.groups.clear();
  kit.host = std::move(parsed);
  return kit;
}

}  // namespace csi_proxy::plugin_check

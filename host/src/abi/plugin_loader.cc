// Plugin loading and ABI negotiation; see plugin_loader.h.
#include "abi/plugin_loader.h"

#include "config/trusted_files.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <type_traits>

#include "abi/abi_struct.h"
#include "abi/library_scope.h"

namespace csi_proxy::host {
namespace {

// "file:line: groups.<name>.<key>: " for the first of the group's own keys that `message` quotes ('key'), and the
// host's keys of a group table as a hint, since a misspelt one of those reaches the library as its own.
std::string LocateGroupKeyError(const GroupConfig& g, const std::string& message) {
  std::string where;
  for (const auto& [key, line] : g.key_lines) {
    if (message.find("'" + key + "'") == std::string::npos) continue;
    where = g.source + ":" + std::to_string(line) + ": groups." + g.name + "." + key + ": ";
    break;
  }
  std::string host_keys;
  for (const auto& k : GroupHostKeys()) host_keys += (host_keys.empty() ? "" : ", ") + k;
  return where + message + " (keys the host itself reads in a group table: " + host_keys + ")";
}

std::string Prefix(const GroupConfig& g) { return "group '" + g.name + "' (" + g.library + "): "; }

Status Refuse(const GroupConfig& g, Code code, const std::string& reason) { return Status(code, Prefix(g) + reason); }

// A library's group name for a message: a bad one may be long or hold control characters.
std::string DescribeGroupName(const char* name) {
  std::string out;
  for (const char* p = name; *p != '\0' && out.size() < 2 * CSI_PROXY_GROUP_NAME_MAX; ++p) {
    const unsigned char ch = static_cast<unsigned char>(*p);
    out += ch >= 0x20 && ch < 0x7f ? *p : '?';
  }
  if (std::strlen(name) > out.size()) out += "...";
  return out;
}

}  // namespace

std::string GroupConfigToml(const GroupConfig& group, const HostConfig& host) {
  toml::array working_dirs;
  for (const auto& d : host.working_dirs) working_dirs.push_back(d);
  toml::table host_table{{"kubelet_path", host.kubelet_path},
                         {"working_dirs", std::move(working_dirs)},
                         {"state_dir", host.state_dir},
                         {"group_name", group.name}};
  toml::table doc{{"host", std::move(host_table)}, {"group", group.settings}};
  std::ostringstream out;
  out << doc;
  return out.str();
}

LoadedPlugin::~LoadedPlugin() {
  Shutdown();
  library_.reset();  // unloaded after its shutdown, never before
}

void LoadedPlugin::Shutdown() {
  if (!initialized_) return;
  initialized_ = false;
  try {
    LibraryScope scope(config_name_.c_str(), "shutdown");
    if (api_.shutdown != nullptr) api_.shutdown(plugin_state_);
  } catch (...) {
    spdlog::error("group '{}' ({}): shutdown threw an exception", config_name_, library());
  }
}

StatusOr<std::unique_ptr<LoadedPlugin>> LoadPlugin(const GroupConfig& group, const HostConfig& host,
                                                   EndpointRegistry& registry, const HostPresentation& as) {
  std::error_code ec;
  if (!std::filesystem::exists(group.library, ec)) {
    return Refuse(group, Code::kNotFound, "the library file does not exist");
  }
  // The file checked is the file loaded: a path swapped after the check is never read again.
  auto file = OpenTrustedFile(group.library, "the library");
  if (!file.ok()) return Refuse(group, file.status().code(), file.status().message());
  auto plugin = std::make_unique<LoadedPlugin>();
  plugin->config_name_ = group.name;
  plugin->context_ = std::make_unique<csi_proxy_host_context>();
  plugin->context_->library = group.library;
  plugin->context_->group = group.name;
  plugin->context_->versions = group.versions;
  plugin->context_->registry = &registry;

  LibraryScope loading(group.name.c_str(), "load");  // the library's constructors run in the load
  auto library = SharedLibrary::Load(std::move(*file));
  if (!library.ok()) return Refuse(group, Code::kFailedPrecondition, library.status().message());
  plugin->library_ = std::move(*library);
  csi_proxy_plugin_negotiate_fn negotiate =
      plugin->library_->Function<std::remove_pointer_t<csi_proxy_plugin_negotiate_fn>>(CSI_PROXY_PLUGIN_ENTRY_SYMBOL);
  if (negotiate == nullptr) {
    return Refuse(group, Code::kFailedPrecondition,
                  "the library does not export " CSI_PROXY_PLUGIN_ENTRY_SYMBOL "; it is not a csi-proxy group library");
  }

  csi_proxy_host_offer offer{sizeof offer, as.abi_version_min, as.abi_version_max, CSI_PROXY_HOST_VERSION};
  csi_proxy_plugin_answer answer{};
  answer.struct_size = sizeof answer;
  csi_proxy_status_code code = CSI_PROXY_STATUS_INTERNAL;
  try {
    LibraryScope scope(group.name.c_str(), "negotiate");
    code = negotiate(&offer, &answer);
  } catch (...) {
    return Refuse(group, Code::kInternal, "negotiation threw an exception across the C ABI");
  }
  // The answer lives in the host's memory: a library may write up to the struct_size the host set, never more.
  if (answer.struct_size > sizeof answer) {
    return Refuse(group, Code::kFailedPrecondition,
                  "the negotiation answer is malformed: struct_size " + std::to_string(answer.struct_size) +
                      ", but the host offered only " + std::to_string(sizeof answer) + " bytes");
  }
  auto read = ReadAbiStruct(&answer, CSI_PROXY_PLUGIN_ANSWER_V1_SIZE, "the negotiation answer");
  if (!read.ok()) return Refuse(group, Code::kFailedPrecondition, read.status().message());
  answer = *read;  // zero beyond what the library wrote
  if (answer.abi_version < as.abi_version_min || answer.abi_version > as.abi_version_max) {
    return Refuse(group, Code::kFailedPrecondition,
                  "the library speaks ABI version " + std::to_string(answer.abi_version) + "; this host speaks " +
                      std::to_string(as.abi_version_min) + " to " + std::to_string(as.abi_version_max));
  }
  if (code != CSI_PROXY_STATUS_OK) {
    return Refuse(group, Code::kFailedPrecondition, "negotiation failed with " + CodeName(code));
  }
  if (answer.group == nullptr || answer.api == nullptr) {
    return Refuse(group, Code::kFailedPrecondition, "the negotiation answer has no group name or function table");
  }
  auto api = ReadAbiStruct(answer.api, CSI_PROXY_PLUGIN_API_V1_SIZE, "the plugin function table");
  if (!api.ok()) return Refuse(group, Code::kFailedPrecondition, api.status().message());
  plugin->api_ = *api;
  if (plugin->api_.init == nullptr || plugin->api_.shutdown == nullptr) {
    return Refuse(group, Code::kFailedPrecondition, "the plugin function table lacks init or shutdown");
  }
  if (!IsValidGroupName(answer.group)) {
    return Refuse(
        group, Code::kFailedPrecondition,
        "the library answers the group name '" + DescribeGroupName(answer.group) + "', which is not " + kGroupNameRule);
  }
  plugin->abi_version_ = answer.abi_version;
  plugin->plugin_version_ = answer.plugin_version != nullptr ? answer.plugin_version : "unknown";
  plugin->context_->group = answer.group;
  if (plugin->context_->group != group.name) {
    // Its endpoints would be named after the group it answers: a library may not take another group's place.
    return Refuse(group, Code::kFailedPrecondition,
                  "the library answers the group name '" + plugin->context_->group +
                      "', but it is configured under [groups." + group.name +
                      "]; a library serves only the group of its own name (configure it under [groups." +
                      plugin->context_->group + "], or use the library of group '" + group.name + "')");
  }

  plugin->config_toml_ = GroupConfigToml(group, host);
  plugin->host_api_ = MakeHostApi(plugin->context_.get(), plugin->config_toml_, host.check_only);
  plugin->host_api_.abi_version = plugin->abi_version_;  // the version agreed, as plugin_abi.h says
  if (as.host_api_size < sizeof plugin->host_api_) {
    // An older host's table ends earlier: what it did not have reads as zero to a library that looks anyway.
    auto* bytes = reinterpret_cast<unsigned char*>(&plugin->host_api_);
    std::memset(bytes + as.host_api_size, 0, sizeof plugin->host_api_ - as.host_api_size);
    plugin->host_api_.struct_size = as.host_api_size;
  }
  char error[1024] = {0};
  plugin->context_->registering = true;
  try {
    LibraryScope scope(group.name.c_str(), "init");
    code = plugin->api_.init(&plugin->host_api_, &plugin->plugin_state_, error, sizeof error);
  } catch (...) {
    code = CSI_PROXY_STATUS_INTERNAL;
    std::snprintf(error, sizeof error, "init threw an exception across the C ABI");
  }
  plugin->context_->registering = false;
  error[sizeof error - 1] = '\0';
  if (code != CSI_PROXY_STATUS_OK) {
    // A registration the host refused explains itself; otherwise the plugin's own reason.
    // A malformed registration is the library's fault, never the admin's (INVALID_ARGUMENT is kept for that).
    if (!plugin->context_->refusal.empty()) {
      Code refusal = static_cast<Code>(code);
      return Refuse(group, refusal == Code::kInvalidArgument ? Code::kFailedPrecondition : refusal,
                    plugin->context_->refusal);
    }
    // INVALID_ARGUMENT from init means the group's own keys are wrong: a configuration error, located in the file.
    if (code == CSI_PROXY_STATUS_INVALID_ARGUMENT) {
      return Refuse(group, Code::kInvalidArgument,
                    "init failed with INVALID_ARGUMENT: " + LocateGroupKeyError(group, error));
    }
    return Refuse(group, Code::kFailedPrecondition, "init failed with " + CodeName(code) + ": " + error);
  }
  plugin->initialized_ = true;
  for (const auto& wanted : group.versions) {
    const auto& offered = plugin->context_->offered_versions;
    if (std::find(offered.begin(), offered.end(), wanted) == offered.end()) {
      return Refuse(group, Code::kInvalidArgument, "versions lists '" + wanted + "', which the library does not serve");
    }
  }
  if (plugin->context_->pending.empty()) {
    return Refuse(group, Code::kFailedPrecondition, "the library registered no service");
  }
  return plugin;
}

}  // namespace csi_proxy::host

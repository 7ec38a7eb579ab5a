// csi_proxy/entry_points.hpp: the library's side of the C ABI, written once for every group: the one exported
// function (negotiation), init (configuration, the plugin's Init, registration) and shutdown, each behind a
// catch-all so that no exception crosses the boundary. A group names itself with one macro:
//
//   CSI_PROXY_PLUGIN(WidgetPlugin, "widget", "1.0.0")   // the group's name and version typed in
//   CSI_PROXY_GROUP_PLUGIN(WidgetPlugin)                // ... or taken from the build: csi_proxy_add_plugin()'s
//                                                       // GROUP and VERSION (by default the project's version)
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "csi_proxy/host_log.hpp"
#include "csi_proxy/host_table.hpp"
#include "csi_proxy/plugin_abi.h"
#include "csi_proxy/plugin_base.hpp"
#include "csi_proxy/status.hpp"

namespace csi_proxy::sdk {

namespace internal {

// The state behind plugin_state: the plugin object and the services whose methods the host points into.
struct PluginState {
  std::unique_ptr<Plugin> plugin;
  std::unique_ptr<Host> host;
};

inline void WriteError(char* error, size_t error_size, const std::string& message) {
  if (error == nullptr || error_size == 0) return;
  size_t n = std::min(message.size(), error_size - 1);
  std::memcpy(error, message.data(), n);
  error[n] = '\0';
}

inline Status RegisterServices(const csi_proxy_host_api* api, Host& host) {
  for (const auto& service : host.services()) {
    std::vector<csi_proxy_method_desc> methods;
    for (const auto& m : service->methods()) {
      csi_proxy_method_desc d{};
      d.struct_size = sizeof d;
      d.name = m->name.c_str();
      d.handler = &MethodBase::Trampoline;
      d.plugin_method_ctx = m.get();
      d.flags = m->flags;
      methods.push_back(d);
    }
    csi_proxy_service_desc desc{};
    desc.struct_size = sizeof desc;
    desc.version = service->version().c_str();
    desc.service_name = service->service_name().c_str();
    desc.methods = methods.data();
    desc.method_count = methods.size();
    desc.method_desc_size = sizeof(csi_proxy_method_desc);
    desc.file_descriptor_set = reinterpret_cast<const uint8_t*>(service->descriptor_set().data());
    desc.file_descriptor_set_size = service->descriptor_set().size();
    csi_proxy_status_code code = api->register_service(api->host, &desc);
    if (code != CSI_PROXY_STATUS_OK) {
      return Status(static_cast<Code>(code), "the host refused service " + service->service_name());
    }
  }
  return Status::Ok();
}

template <typename PluginClass>
csi_proxy_status_code Init(const csi_proxy_host_api* api, void** plugin_state, char* error, size_t error_size) {
  try {
    csi_proxy_host_api table{};
    if (!ReadAbiStruct(api, CSI_PROXY_HOST_API_V1_SIZE, table)) {
      WriteError(error, error_size,
                 "the host's function table is truncated: struct_size " +
                     (api != nullptr ? std::to_string(api->struct_size) : std::string("(no table)")) +
                     ", expected at least " + std::to_string(CSI_PROXY_HOST_API_V1_SIZE));
      return CSI_PROXY_STATUS_FAILED_PRECONDITION;
    }
    HostTable() = table;
    api = HostApi();
    auto config = PluginConfig::Parse(std::string_view(api->config_toml, api->config_toml_size));
    if (!config.ok()) {
      WriteError(error, error_size, config.status().message());
      return static_cast<csi_proxy_status_code>(config.status().code());
    }
    auto state = std::make_unique<PluginState>();
    // A host older than init_flags leaves it out of its table: ReadAbiStruct reads it as 0.
    state->host =
        std::make_unique<Host>(std::move(config).value(), (table.init_flags & CSI_PROXY_INIT_CHECK_ONLY) != 0);
    state->plugin = std::make_unique<PluginClass>();
    Status status = state->plugin->Init(*state->host);
    if (status.ok()) {
      status = RegisterServices(api, *state->host);
      // The plugin's Init succeeded, so what it started must be released here: the host never calls shutdown
      // after a failed init.
      if (!status.ok()) state->plugin->Shutdown();
    }
    if (!status.ok()) {
      WriteError(error, error_size, status.message());
      return static_cast<csi_proxy_status_code>(status.code() == Code::kOk ? Code::kInternal : status.code());
    }
    *plugin_state = state.release();
    return CSI_PROXY_STATUS_OK;
  } catch (...) {
    WriteError(error, error_size, "init threw " + DescribeException(std::current_exception()));
    return CSI_PROXY_STATUS_INTERNAL;
  }
}

inline void Shutdown(void* plugin_state) {
  std::unique_ptr<PluginState> state(static_cast<PluginState*>(plugin_state));
  try {
    if (state && state->plugin) state->plugin->Shutdown();
  } catch (...) {
    LogError("shutdown threw " + DescribeException(std::current_exception()));
  }
}

// The ABI versions this SDK speaks: every version its plugin_abi.h describes.
struct AbiRange {
  uint32_t min = CSI_PROXY_ABI_VERSION_MIN;
  uint32_t max = CSI_PROXY_ABI_VERSION_CURRENT;
};

// The negotiation rule of plugin_abi.h: answers the newest version within both the host's range and `speaks`,
// and writes the answer only up to the host's answer->struct_size (setting struct_size to what it wrote). When
// no version suits both, answers `speaks.max` (so the host can say what did not match) without a table, and
// fails with FAILED_PRECONDITION; an answer struct too short for version 1 fails with INVALID_ARGUMENT.
inline csi_proxy_status_code NegotiateAnswer(const csi_proxy_host_offer* offer, csi_proxy_plugin_answer* answer,
                                             const char* group, const char* plugin_version,
                                             const csi_proxy_plugin_api* table, AbiRange speaks = {}) {
  if (answer == nullptr || answer->struct_size < CSI_PROXY_PLUGIN_ANSWER_V1_SIZE) {
    return CSI_PROXY_STATUS_INVALID_ARGUMENT;
  }
  csi_proxy_plugin_answer full{};
  full.struct_size = std::min(answer->struct_size, sizeof full);
  full.abi_version = speaks.max;
  full.group = group;
  full.plugin_version = plugin_version;
  csi_proxy_host_offer host{};
  csi_proxy_status_code code = CSI_PROXY_STATUS_FAILED_PRECONDITION;
  if (ReadAbiStruct(offer, CSI_PROXY_HOST_OFFER_V1_SIZE, host)) {
    const uint32_t lowest = std::max(host.abi_version_min, speaks.min);
    const uint32_t newest = std::min(host.abi_version_max, speaks.max);
    if (lowest <= newest) {
      full.abi_version = newest;
      full.api = table;
      code = CSI_PROXY_STATUS_OK;
    }
  }
  std::memcpy(answer, &full, full.struct_size);
  return code;
}

template <typename PluginClass>
csi_proxy_status_code Negotiate(const csi_proxy_host_offer* offer, csi_proxy_plugin_answer* answer, const char* group,
                                const char* plugin_version) {
  static const csi_proxy_plugin_api table = {sizeof(csi_proxy_plugin_api), &Init<PluginClass>, &Shutdown};
  return NegotiateAnswer(offer, answer, group, plugin_version, &table);
}

}  // namespace internal
}  // namespace csi_proxy::sdk

// Defines the library's one exported symbol. Use once per group library, at namespace scope.
#define CSI_PROXY_PLUGIN(PluginClass, group, plugin_version)                                         \
  extern "C" CSI_PROXY_PLUGIN_EXPORT csi_proxy_status_code csi_proxy_plugin_negotiate(               \
      const csi_proxy_host_offer* offer, csi_proxy_plugin_answer* answer) {                          \
    return ::csi_proxy::sdk::internal::Negotiate<PluginClass>(offer, answer, group, plugin_version); \
  }

// The same, with the group's name and version from the build: csi_proxy_add_plugin() defines CSI_PROXY_GROUP_NAME
// (its GROUP) and CSI_PROXY_GROUP_VERSION (its VERSION, by default the CMake project's version) for the library's
// sources.
#define CSI_PROXY_GROUP_PLUGIN(PluginClass) CSI_PROXY_PLUGIN(PluginClass, CSI_PROXY_GROUP_NAME, CSI_PROXY_GROUP_VERSION)

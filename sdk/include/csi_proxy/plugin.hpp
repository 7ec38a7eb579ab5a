// csi_proxy/plugin.hpp: the optional header-only C++ layer over plugin_abi.h.
//
// A group library derives from csi_proxy::sdk::Plugin, registers typed protobuf handlers in Init() and names
// itself with CSI_PROXY_PLUGIN(Class, "group", "version"). This layer negotiates the ABI, parses the
// configuration, turns request bytes into messages and back, and is the exception firewall: no exception leaves
// an entry point; a throwing handler fails its call with INTERNAL and a throwing Init refuses the plugin.
//
// Services and methods are named by the structs csi_proxy_add_plugin() generates per proto (v1/echo.csi.h:
// v1::EchoApi with kVersion, kService and one struct per method with kName, Request and Response):
//
//   class EchoPlugin : public csi_proxy::sdk::Plugin {
//    public:
//     csi_proxy::Status Init(csi_proxy::sdk::Host& host) override {
//       host.AddService<v1::EchoApi>().Unary<v1::EchoApi::Echo>([](const auto& req, auto& resp, auto&) {
//         resp.set_text(req.text());
//         return csi_proxy::Status::Ok();
//       });
//       return csi_proxy::Status::Ok();
//     }
//   };
//   CSI_PROXY_PLUGIN(EchoPlugin, "echo", "1.0.0")
#pragma once

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <toml++/toml.h>

#include "csi_proxy/call_scope.hpp"
#include "csi_proxy/log.hpp"
#include "csi_proxy/plugin_abi.h"
#include "csi_proxy/status.hpp"

namespace csi_proxy::sdk {

namespace internal {

// The ABI's growth rule for a struct the host filled: a zero-filled copy of min(struct_size, sizeof) bytes,
// whose struct_size is the number of bytes copied. False (and `out` zeroed) when `in` is null or shorter than
// `v1_size`, its CSI_PROXY_*_V1_SIZE.
template <typename T>
bool ReadAbiStruct(const T* in, size_t v1_size, T& out) {
  static_assert(std::is_trivially_copyable_v<T> && std::is_same_v<decltype(in->struct_size), size_t>);
  out = T{};
  if (in == nullptr || in->struct_size < v1_size) return false;
  const size_t size = std::min(in->struct_size, sizeof out);
  std::memcpy(&out, in, size);
  out.struct_size = size;
  return true;
}

// This library's copy of the host table, read by the growth rule in init, before any handler can run;
// read-only afterwards. Each group library is its own shared object with hidden visibility, so this is per
// library.
inline csi_proxy_host_api& HostTable() {
  static csi_proxy_host_api table{};
  return table;
}
// The host table, or null before init.
inline const csi_proxy_host_api* HostApi() {
  const csi_proxy_host_api& table = HostTable();
  return table.struct_size != 0 ? &table : nullptr;
}

}  // namespace internal

// Writes to the host's log (tagged with the group). Safe from any thread once Init has started.
inline void Log(LogLevel level, std::string_view message) {
  const csi_proxy_host_api* api = internal::HostApi();
  if (api != nullptr) api->log(api->host, static_cast<int32_t>(level), message.data(), message.size());
}
inline void LogDebug(std::string_view m) { Log(LogLevel::kDebug, m); }
inline void LogInfo(std::string_view m) { Log(LogLevel::kInfo, m); }
inline void LogWarn(std::string_view m) { Log(LogLevel::kWarn, m); }
inline void LogError(std::string_view m) { Log(LogLevel::kError, m); }

// The sink (log.hpp) that writes to the host's log: what a group hands its service layer and backend.
inline LogSink HostLogSink() {
  return [](LogLevel level, std::string_view message) { Log(level, message); };
}

// The configuration the host hands to the group: node-wide settings and the group's own keys.
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

  // Refuses a key the group does not know, so that a typo in the configuration is reported, not ignored:
  // INVALID_ARGUMENT "unknown key 'x' in [groups.<name>]; known keys: a, b".
  Status RequireKnownKeys(std::initializer_list<std::string_view> known) const {
    for (const auto& [key, value] : group_table()) {
      if (std::find(known.begin(), known.end(), key.str()) != known.end()) continue;
      std::string list;
      for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      return InvalidArgument("unknown key '" + std::string(key.str()) + "' in [groups." + group_name_ + "]; " +
                             (known.size() == 0 ? std::string("the group has no keys") : "known keys: " + list));
    }
    return Status::Ok();
  }

  // Typed lookups of the group's own keys. A key of the wrong type is an error that names it.
  StatusOr<std::string> GetString(std::string_view key, std::string fallback) const {
    return Get<std::string>(key, std::move(fallback), "a string");
  }
  StatusOr<bool> GetBool(std::string_view key, bool fallback) const { return Get<bool>(key, fallback, "a boolean"); }
  StatusOr<int64_t> GetInt(std::string_view key, int64_t fallback) const {
    return Get<int64_t>(key, fallback, "an integer");
  }
  StatusOr<std::vector<std::string>> GetStringArray(std::string_view key) const {
    const toml::node* node = group_table().get(key);
    std::vector<std::string> out;
    if (node == nullptr) return out;
    const toml::array* arr = node->as_array();
    if (arr == nullptr) return InvalidArgument(KeyError(key, "an array of strings"));
    for (const auto& item : *arr) {
      auto s = item.value<std::string>();
      if (!s) return InvalidArgument(KeyError(key, "an array of strings"));
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
    if (!v) return InvalidArgument(KeyError(key, type_name));
    return *v;
  }
  static std::string KeyError(std::string_view key, const char* type_name) {
    return "group key '" + std::string(key) + "' must be " + type_name;
  }

  toml::table doc_;
  std::string group_name_;
  std::string kubelet_path_ = "/var/lib/kubelet";
  std::string state_dir_ = "/var/lib/csi-proxy";
  std::vector<std::string> working_dirs_;
};

struct PeerCredentials {
  int64_t pid = -1;
  int64_t uid = -1;
  int64_t gid = -1;
};

// What a handler may ask about its call. Valid until the call is completed.
class CallContext {
 public:
  explicit CallContext(csi_proxy_host_call* call) : call_(call) {}

  // The client's deadline; time_point::max() when it set none.
  std::chrono::system_clock::time_point deadline() const {
    int64_t ns = internal::HostApi()->call_deadline_unix_ns(call_);
    if (ns == INT64_MAX) return std::chrono::system_clock::time_point::max();
    return std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::nanoseconds(ns)));
  }
  // True once the client cancelled or the deadline passed: long work should stop and fail.
  bool IsCancelled() const { return internal::HostApi()->call_is_cancelled(call_) != 0; }
  // The caller's pid, uid and gid; -1 for what the host does not know.
  PeerCredentials peer() const {
    // The host writes only what it knows within our struct_size; the rest keeps "unknown".
    csi_proxy_peer_credentials c{sizeof c, -1, -1, -1};
    internal::HostApi()->call_peer_credentials(call_, &c);
    return {c.pid, c.uid, c.gid};
  }

 private:
  csi_proxy_host_call* call_;
};

namespace internal {

inline void CompleteCall(csi_proxy_host_call* call, const Status& status, const std::string& response = {}) {
  const csi_proxy_host_api* api = HostApi();
  api->complete_call(call, static_cast<csi_proxy_status_code>(status.code()), status.message().data(),
                     status.message().size(), reinterpret_cast<const uint8_t*>(response.data()), response.size());
}

inline std::string DescribeException(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "an exception of unknown type";
  }
}

template <typename Req>
Status ParseRequest(const uint8_t* data, size_t size, Req& req) {
  if (size > static_cast<size_t>(INT_MAX) || !req.ParseFromArray(data, static_cast<int>(size))) {
    return InvalidArgument("malformed request: the bytes are not a valid " + std::string(req.GetTypeName()));
  }
  return Status::Ok();
}

// One registered method: owns the typed handler; the host gets a pointer to it as plugin_method_ctx.
struct MethodBase {
  virtual ~MethodBase() = default;
  virtual void Handle(csi_proxy_host_call* call, const uint8_t* request, size_t size) = 0;
  std::string name;
  uint32_t flags = 0;  // CSI_PROXY_METHOD_*

  static void Trampoline(void* ctx, csi_proxy_host_call* call, const uint8_t* request, size_t size) noexcept {
    static_cast<MethodBase*>(ctx)->Handle(call, request, size);
  }
};

}  // namespace internal

// Completes one asynchronous call, from any thread, exactly once. A Responder dropped without Finish fails the
// call with INTERNAL so a client never waits forever.
template <typename Resp>
class Responder {
 public:
  explicit Responder(csi_proxy_host_call* call) : call_(call) {}
  Responder(Responder&& other) noexcept : call_(std::exchange(other.call_, nullptr)) {}
  Responder& operator=(Responder&&) = delete;
  Responder(const Responder&) = delete;
  ~Responder() {
    if (call_ != nullptr) internal::CompleteCall(call_, Internal("the handler dropped the call without answering"));
  }

  CallContext context() const { return CallContext(call_); }

  void Finish(const Status& status, const Resp& response = Resp()) {
    if (call_ == nullptr) return;
    csi_proxy_host_call* call = std::exchange(call_, nullptr);
    if (!status.ok()) return internal::CompleteCall(call, status);
    std::string bytes;
    if (!response.SerializeToString(&bytes)) return internal::CompleteCall(call, Internal("cannot serialize response"));
    internal::CompleteCall(call, status, bytes);
  }

 private:
  csi_proxy_host_call* call_;
};

// What a method does to the node, declared with it (the host may let more callers reach read-only methods).
enum MethodFlags : uint32_t {
  kMutating = 0,                          // changes the node (the default, and what a method without flags counts as)
  kReadOnly = CSI_PROXY_METHOD_READ_ONLY,  // only reads: no mount, format, file, session or service state changes
  // Answers from memory before it returns and never waits on the system (no file, device, mount, network or
  // program): the host may run it on the thread that read the request, saving a thread hand-off. A handler that
  // may block must not say so. Combine with `|`: kReadOnly | kNonBlocking.
  kNonBlocking = CSI_PROXY_METHOD_NONBLOCKING,
};
constexpr MethodFlags operator|(MethodFlags a, MethodFlags b) {
  return static_cast<MethodFlags>(static_cast<uint32_t>(a) | static_cast<uint32_t>(b));
}

// Collects the methods of one gRPC service of one API version.
class ServiceBuilder {
 public:
  // `descriptor_set`: the serialized FileDescriptorSet defining the service (static storage), or empty.
  ServiceBuilder(std::string version, std::string service_name, std::string_view descriptor_set = {})
      : version_(std::move(version)), service_name_(std::move(service_name)), descriptor_set_(descriptor_set) {}

  // A handler that answers before it returns: Status fn(const Req&, Resp&, CallContext&).
  template <typename Req, typename Resp, typename Fn>
  ServiceBuilder& Unary(std::string name, Fn fn, MethodFlags flags = kMutating) {
    struct Method : internal::MethodBase {
      Fn fn;
      explicit Method(Fn f) : fn(std::move(f)) {}
      void Handle(csi_proxy_host_call* call, const uint8_t* data, size_t size) override {
        Status status;
        std::string bytes;
        try {
          Req req;
          status = internal::ParseRequest(data, size, req);
          if (status.ok()) {
            Resp resp;
            CallContext ctx(call);
            CallScope scope(internal::HostApi(), call);
            status = fn(static_cast<const Req&>(req), resp, ctx);
            if (status.ok() && !resp.SerializeToString(&bytes)) status = Internal("cannot serialize response");
          }
        } catch (...) {
          status = Internal(name + " failed with " + internal::DescribeException(std::current_exception()));
        }
        internal::CompleteCall(call, status, bytes);
      }
    };
    Add(std::move(name), flags, std::make_unique<Method>(std::move(fn)));
    return *this;
  }

  // A handler that may answer later from any thread: void fn(Req request, Responder<Resp> responder).
  template <typename Req, typename Resp, typename Fn>
  ServiceBuilder& AsyncUnary(std::string name, Fn fn, MethodFlags flags = kMutating) {
    struct Method : internal::MethodBase {
      Fn fn;
      explicit Method(Fn f) : fn(std::move(f)) {}
      void Handle(csi_proxy_host_call* call, const uint8_t* data, size_t size) override {
        Responder<Resp> responder(call);
        try {
          Req req;
          Status status = internal::ParseRequest(data, size, req);
          if (!status.ok()) return responder.Finish(status);
          fn(std::move(req), std::move(responder));
        } catch (...) {
          responder.Finish(Internal(name + " failed with " + internal::DescribeException(std::current_exception())));
        }
      }
    };
    Add(std::move(name), flags, std::make_unique<Method>(std::move(fn)));
    return *this;
  }

  // The same, with the method named by its generated struct (Method::kName, Method::Request, Method::Response).
  template <typename Method, typename Fn>
  ServiceBuilder& Unary(Fn fn, MethodFlags flags = kMutating) {
    return Unary<typename Method::Request, typename Method::Response>(std::string(Method::kName), std::move(fn),
                                                                       flags);
  }
  template <typename Method, typename Fn>
  ServiceBuilder& AsyncUnary(Fn fn, MethodFlags flags = kMutating) {
    return AsyncUnary<typename Method::Request, typename Method::Response>(std::string(Method::kName), std::move(fn),
                                                                            flags);
  }

  const std::string& version() const { return version_; }
  const std::string& service_name() const { return service_name_; }
  std::string_view descriptor_set() const { return descriptor_set_; }
  const std::vector<std::unique_ptr<internal::MethodBase>>& methods() const { return methods_; }

 private:
  void Add(std::string name, MethodFlags flags, std::unique_ptr<internal::MethodBase> method) {
    method->name = std::move(name);
    method->flags = flags;
    methods_.push_back(std::move(method));
  }

  std::string version_;
  std::string service_name_;
  std::string_view descriptor_set_;
  std::vector<std::unique_ptr<internal::MethodBase>> methods_;
};

// What Init receives: the configuration and the place to declare services.
class Host {
 public:
  explicit Host(PluginConfig config) : config_(std::move(config)) {}

  const PluginConfig& config() const { return config_; }

  // Declares a service; its methods are registered with the host when Init returns successfully.
  ServiceBuilder& AddService(std::string version, std::string service_name, std::string_view descriptor_set = {}) {
    services_.push_back(
        std::make_unique<ServiceBuilder>(std::move(version), std::move(service_name), descriptor_set));
    return *services_.back();
  }

  // The same, with the service named by its generated struct (Api::kVersion, Api::kService), whose descriptors
  // the host then serves through gRPC reflection.
  template <typename Api>
  ServiceBuilder& AddService() {
    return AddService(std::string(Api::kVersion), std::string(Api::kService), Api::DescriptorSet());
  }

  std::vector<std::unique_ptr<ServiceBuilder>>& services() { return services_; }

 private:
  PluginConfig config_;
  std::vector<std::unique_ptr<ServiceBuilder>> services_;
};

// The base of every group library written with this layer.
class Plugin {
 public:
  virtual ~Plugin() = default;
  // Reads the configuration and declares services. A non-OK status refuses the plugin with that reason.
  virtual Status Init(Host& host) = 0;
  // Called after every call has completed, before the library is unloaded.
  virtual void Shutdown() {}
};

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
    state->host = std::make_unique<Host>(std::move(config).value());
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

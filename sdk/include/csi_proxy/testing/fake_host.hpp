// csi_proxy/testing/fake_host.hpp: an in-process host for a group library's unit tests.
//
// It drives a library through the real C ABI (plugin_abi.h), as the csi-proxy host does: load the library file
// (or take the entry point of one linked into the test), negotiate, init with a TOML configuration, call a method
// by its path with request bytes and get the status, message and response, shut down. No gRPC, no sockets, no
// process: a test calls a method and checks the answer.
//
//   csi_proxy::sdk::testing::FakeHost host({.state_dir = scratch});
//   ASSERT_TRUE(host.Load(WIDGET_LIBRARY).ok());               // or host.Link(&csi_proxy_plugin_negotiate)
//   ASSERT_TRUE(host.Negotiate().ok());
//   ASSERT_TRUE(host.Init("speed = 5\n").ok());                 // the keys of [groups.widget]
//   v1::FrobResponse resp;
//   auto result = host.Call("/v1.Widget/Frob", req, &resp);     // or Call(path, bytes) for raw bytes
//   EXPECT_TRUE(result.ok()) << result.Describe();
//   EXPECT_TRUE(host.violations().empty());
//
// It also checks the library keeps the contract, as the host does: every call completed exactly once with a gRPC
// status code, services registered only during init with complete descriptions, log levels in range. What it finds
// is kept for violations() (or handed to FakeHostOptions::on_violation, e.g. to abort a fuzzer).
//
// Handlers run on the thread that calls Call(); a library may complete a call later from a thread of its own, and
// Call() waits for that (CallOptions::wait). A call the library never completes is left to it: the library then is
// neither shut down nor unloaded, as in the host.
#pragma once

#include <algorithm>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <toml++/toml.h>

#include "csi_proxy/call_context.hpp"
#include "csi_proxy/host_table.hpp"
#include "csi_proxy/log.hpp"
#include "csi_proxy/plugin_abi.h"
#include "csi_proxy/status.hpp"
#if defined(_WIN32)
#include "csi_proxy/testing/library_file_windows.hpp"
#else
#include "csi_proxy/testing/library_file_linux.hpp"
#endif

namespace csi_proxy::sdk::testing {

struct FakeHostOptions {
  // The node-wide settings of the configuration's [host] table.
  std::string kubelet_path = "/var/lib/kubelet";
  std::vector<std::string> working_dirs;
  std::string state_dir = "/var/lib/csi-proxy";
  std::string group_name;   // the [groups.<name>] table; empty: the group the library names itself
  bool check_only = false;  // init as a configuration check (CSI_PROXY_INIT_CHECK_ONLY)
  // The ABI versions offered in negotiation.
  uint32_t abi_version_min = CSI_PROXY_ABI_VERSION_MIN;
  uint32_t abi_version_max = CSI_PROXY_ABI_VERSION_CURRENT;
  // Called for each breach of the contract as it is found, on the thread that made it; by default they are kept
  // for violations().
  std::function<void(const std::string&)> on_violation;
  // Called for each line the library logs; by default the last 1000 are kept for log().
  std::function<void(LogLevel, std::string_view)> on_log;
};

struct CallOptions {
  std::chrono::system_clock::time_point deadline = std::chrono::system_clock::time_point::max();  // max: none
  std::function<bool()> cancelled;  // true once the client gives up (call_is_cancelled, with the deadline)
  PeerCredentials peer;             // the caller; -1 where unknown
  std::chrono::milliseconds wait{std::chrono::seconds(30)};  // how long Call() waits for the completion
};

struct CallResult {
  bool completed = false;  // false: the library did not complete the call within CallOptions::wait
  Code code = Code::kUnknown;
  std::string message;   // the status message (failures)
  std::string response;  // the serialized response (success)

  bool ok() const { return completed && code == Code::kOk; }
  std::string Describe() const {
    return completed ? CodeName(static_cast<int32_t>(code)) + (message.empty() ? "" : ": " + message)
                     : "not completed: " + message;
  }
};

struct RegisteredMethod {
  std::string path;     // "/v1.Widget/Frob"
  std::string version;  // "v1": the endpoint csi-proxy-<group>-<version>
  uint32_t flags = 0;   // CSI_PROXY_METHOD_* (0 for a version-1 library)
  csi_proxy_plugin_handler_fn handler = nullptr;
  void* context = nullptr;
};

struct LogLine {
  LogLevel level;
  std::string message;
};

class FakeHost {
 public:
  explicit FakeHost(FakeHostOptions options = {}) : options_(std::move(options)), findings_(new Findings) {
    findings_->on_violation = options_.on_violation;
    api_.struct_size = sizeof api_;
    api_.host = reinterpret_cast<csi_proxy_host_context*>(this);
    api_.log = &FakeHost::LogFn;
    api_.register_service = &FakeHost::RegisterServiceFn;
    api_.complete_call = &FakeHost::CompleteCallFn;
    api_.call_deadline_unix_ns = &FakeHost::DeadlineFn;
    api_.call_is_cancelled = &FakeHost::IsCancelledFn;
    api_.call_peer_credentials = &FakeHost::PeerCredentialsFn;
    api_.init_flags = options_.check_only ? CSI_PROXY_INIT_CHECK_ONLY : 0u;
  }
  FakeHost(const FakeHost&) = delete;
  FakeHost& operator=(const FakeHost&) = delete;

  // Shuts the library down (see Shutdown), then unloads a loaded one, unless a call into it may still run.
  ~FakeHost() {
    Shutdown();
    if (!PendingCalls().empty()) {
      library_.KeepLoaded();  // its code may still complete them
      for (auto& call : pending_) call.release();
    }
  }

  // Loads the library file at `path` as the host does (RTLD_NOW | RTLD_LOCAL) and finds its one entry point.
  Status Load(const std::string& path) {
    CSI_PROXY_ASSIGN_OR_RETURN(library_, LibraryFile::Open(path));
    negotiate_ = reinterpret_cast<csi_proxy_plugin_negotiate_fn>(library_.Symbol(CSI_PROXY_PLUGIN_ENTRY_SYMBOL));
    if (negotiate_ == nullptr) return NotFound(path + " does not export " CSI_PROXY_PLUGIN_ENTRY_SYMBOL);
    return Status::Ok();
  }
  // A library linked into the test: its entry point (csi_proxy_plugin_negotiate of CSI_PROXY_PLUGIN).
  void Link(csi_proxy_plugin_negotiate_fn negotiate) { negotiate_ = negotiate; }

  // Offers [abi_version_min, abi_version_max]. The library's refusal keeps its code; an answer that breaks the
  // ABI's rules (a version outside the range, no table, a bad group name) is FAILED_PRECONDITION and a violation.
  Status Negotiate() {
    if (negotiate_ == nullptr) return FailedPrecondition("no library: call Load or Link first");
    csi_proxy_host_offer offer{sizeof offer, options_.abi_version_min, options_.abi_version_max, "fake-host"};
    csi_proxy_plugin_answer answer{};
    answer.struct_size = sizeof answer;
    const csi_proxy_status_code code = negotiate_(&offer, &answer);
    if (answer.struct_size > sizeof answer) return Refuse("the answer's struct_size grew beyond the host's");
    group_ = answer.group != nullptr ? answer.group : "";
    plugin_version_ = answer.plugin_version != nullptr ? answer.plugin_version : "";
    abi_version_ = answer.abi_version;
    if (code != CSI_PROXY_STATUS_OK) {
      return Status(static_cast<Code>(code), "the library refused ABI versions " + Range() + "; it speaks version " +
                                                 std::to_string(answer.abi_version));
    }
    if (answer.abi_version < offer.abi_version_min || answer.abi_version > offer.abi_version_max) {
      return Refuse("the library answered ABI version " + std::to_string(answer.abi_version) + ", outside " + Range());
    }
    if (!IsGroupName(group_)) return Refuse("the library's group name '" + group_ + "' breaks the ABI's syntax");
    if (!internal::ReadAbiStruct(answer.api, CSI_PROXY_PLUGIN_API_V1_SIZE, plugin_api_) ||
        plugin_api_.init == nullptr || plugin_api_.shutdown == nullptr) {
      return Refuse("the library's function table is missing or truncated");
    }
    api_.abi_version = answer.abi_version;
    return Status::Ok();
  }
  const std::string& group() const { return group_; }
  const std::string& plugin_version() const { return plugin_version_; }
  uint32_t abi_version() const { return abi_version_; }

  // Calls init with the configuration a host hands it: [host] from the options, and `group_toml` (the keys of
  // the group's [groups.<name>] table, as an admin writes them) as [group]. The library's failure keeps its code
  // and message (INVALID_ARGUMENT: the keys are wrong).
  Status Init(std::string_view group_toml = {}) {
    if (plugin_api_.init == nullptr) return FailedPrecondition("not negotiated: call Negotiate first");
    if (initialized_) return FailedPrecondition("init runs once");
    try {
      (void)toml::parse(group_toml);
    } catch (const toml::parse_error& err) {
      return InvalidArgument("the test's group keys are not TOML: " + std::string(err.description()));
    }
    toml::array dirs;
    for (const auto& d : options_.working_dirs) dirs.push_back(d);
    toml::table host{{"kubelet_path", options_.kubelet_path},
                     {"working_dirs", dirs},
                     {"state_dir", options_.state_dir},
                     {"group_name", options_.group_name.empty() ? group_ : options_.group_name}};
    std::ostringstream text;
    text << "[host]\n" << host << "\n\n[group]\n" << group_toml << "\n";
    config_toml_ = text.str();
    api_.config_toml = config_toml_.c_str();
    api_.config_toml_size = config_toml_.size();

    char error[1024] = {0};
    in_init_ = true;
    const csi_proxy_status_code code = plugin_api_.init(&api_, &state_, error, sizeof error);
    in_init_ = false;
    error[sizeof error - 1] = '\0';
    if (code != CSI_PROXY_STATUS_OK) {
      methods_.clear();
      return Status(static_cast<Code>(code), error);
    }
    initialized_ = true;
    return Status::Ok();
  }

  // The registered methods, in registration order.
  const std::vector<RegisteredMethod>& methods() const { return methods_; }
  const RegisteredMethod* FindMethod(std::string_view path) const {
    for (const auto& m : methods_) {
      if (m.path == path) return &m;
    }
    return nullptr;
  }

  // Calls the method at `path` with `request` (serialized bytes) and waits for its completion. An unknown path
  // is UNIMPLEMENTED, as the host answers it.
  CallResult Call(std::string_view path, std::string_view request, const CallOptions& options = {}) {
    CallResult result;
    const RegisteredMethod* method = initialized_ ? FindMethod(path) : nullptr;
    if (method == nullptr) {
      result.completed = true;
      result.code = Code::kUnimplemented;
      result.message = "no method " + std::string(path) + (initialized_ ? "" : " (the library is not initialised)");
      return result;
    }
    auto call = std::make_unique<FakeCall>(findings_, method->path, options);
    FakeCall* raw = call.get();
    {
      // The request lives only while the handler runs, as in the host.
      std::vector<uint8_t> bytes(request.begin(), request.end());
      method->handler(method->context, reinterpret_cast<csi_proxy_host_call*>(raw), bytes.data(), bytes.size());
    }
    std::unique_lock lock(raw->mu);
    if (!raw->done.wait_for(lock, options.wait, [&] { return raw->completions > 0; })) {
      lock.unlock();
      result.message = method->path + " was not completed within " + std::to_string(options.wait.count()) + " ms";
      pending_.push_back(std::move(call));  // the library may still complete it
      return result;
    }
    result.completed = true;
    result.code = static_cast<Code>(raw->code);
    result.message = raw->message;
    result.response = raw->response;
    lock.unlock();
    // Kept a while, so that a second completion shortly after is reported instead of touching freed memory.
    retired_.push_back(std::move(call));
    if (retired_.size() > kRetiredCalls) retired_.pop_front();
    return result;
  }

  // The same with messages: serializes `request`, parses the response into `response` (if given).
  template <typename Response, typename Request>
  CallResult Call(std::string_view path, const Request& request, Response* response, const CallOptions& options = {}) {
    std::string bytes;
    if (!request.SerializeToString(&bytes)) return {true, Code::kInvalidArgument, "the request does not serialize", {}};
    CallResult result = Call(path, bytes, options);
    if (result.ok() && response != nullptr && !response->ParseFromString(result.response)) {
      result.code = Code::kInternal;
      result.message = "the response does not parse as " + std::string(response->GetTypeName());
    }
    return result;
  }

  // Calls shutdown once, as the host does when every call has completed. With a call still not completed it does
  // not (neither does the host: a hung handler means no shutdown and no unload), and says so as a violation.
  void Shutdown() {
    if (!initialized_ || shut_down_) return;
    if (size_t pending = PendingCalls().size(); pending > 0) {
      if (!shutdown_refused_) {
        findings_->Violation("shutdown not called: " + std::to_string(pending) + " call(s) never completed");
      }
      shutdown_refused_ = true;
      return;
    }
    shut_down_ = true;
    plugin_api_.shutdown(state_);
  }

  // The breaches of the contract found so far (empty unless on_violation takes them).
  std::vector<std::string> violations() const {
    std::lock_guard lock(findings_->mu);
    return findings_->violations;
  }
  // The library's log lines (unless on_log takes them), the last 1000.
  std::vector<LogLine> log() const {
    std::lock_guard lock(findings_->mu);
    return {log_.begin(), log_.end()};
  }

 private:
  static constexpr size_t kRetiredCalls = 64;
  static constexpr size_t kLogLines = 1000;

  // What outlives the host: a call completed late reports to it.
  struct Findings {
    std::mutex mu;
    std::vector<std::string> violations;
    std::function<void(const std::string&)> on_violation;
    void Violation(const std::string& what) {
      if (on_violation) return on_violation(what);
      std::lock_guard lock(mu);
      violations.push_back(what);
    }
  };

  struct FakeCall {
    FakeCall(std::shared_ptr<Findings> f, std::string p, CallOptions o)
        : findings(std::move(f)), path(std::move(p)), options(std::move(o)) {}
    std::shared_ptr<Findings> findings;
    std::string path;
    CallOptions options;
    std::mutex mu;
    std::condition_variable done;
    int completions = 0;
    csi_proxy_status_code code = CSI_PROXY_STATUS_UNKNOWN;
    std::string message;
    std::string response;
  };

  static FakeHost* HostOf(csi_proxy_host_context* host) { return reinterpret_cast<FakeHost*>(host); }
  static FakeCall* CallOf(const csi_proxy_host_call* call) {
    return reinterpret_cast<FakeCall*>(const_cast<csi_proxy_host_call*>(call));
  }

  static void LogFn(csi_proxy_host_context* context, csi_proxy_log_level level, const char* message, size_t size) {
    FakeHost* host = HostOf(context);
    if (level < CSI_PROXY_LOG_TRACE || level > CSI_PROXY_LOG_ERROR) {
      return host->findings_->Violation("log level " + std::to_string(level) + " is out of range");
    }
    if (message == nullptr && size > 0) return host->findings_->Violation("log message is null");
    const std::string_view text(message != nullptr ? message : "", size);
    if (host->options_.on_log) return host->options_.on_log(static_cast<LogLevel>(level), text);
    std::lock_guard lock(host->findings_->mu);
    host->log_.push_back({static_cast<LogLevel>(level), std::string(text)});
    if (host->log_.size() > kLogLines) host->log_.pop_front();
  }

  static csi_proxy_status_code RegisterServiceFn(csi_proxy_host_context* context,
                                                 const csi_proxy_service_desc* service) {
    FakeHost* host = HostOf(context);
    auto refuse = [&](csi_proxy_status_code code, const std::string& why) {
      host->findings_->Violation("register_service: " + why);
      return code;
    };
    if (!host->in_init_) return refuse(CSI_PROXY_STATUS_FAILED_PRECONDITION, "called outside init");
    csi_proxy_service_desc desc{};
    if (!internal::ReadAbiStruct(service, CSI_PROXY_SERVICE_DESC_V1_SIZE, desc)) {
      return refuse(CSI_PROXY_STATUS_INVALID_ARGUMENT, "the service description is missing or truncated");
    }
    if (desc.version == nullptr || desc.service_name == nullptr) {
      return refuse(CSI_PROXY_STATUS_INVALID_ARGUMENT, "a service without a version or name");
    }
    if (desc.method_count > 0 && (desc.methods == nullptr || desc.method_desc_size < CSI_PROXY_METHOD_DESC_V1_SIZE)) {
      return refuse(CSI_PROXY_STATUS_INVALID_ARGUMENT, std::string(desc.service_name) + ": a truncated method array");
    }
    std::vector<RegisteredMethod> added;
    const auto* bytes = reinterpret_cast<const unsigned char*>(desc.methods);
    for (size_t i = 0; i < desc.method_count; ++i) {
      csi_proxy_method_desc m{};
      std::memcpy(&m, bytes + i * desc.method_desc_size, std::min(desc.method_desc_size, sizeof m));
      if (m.name == nullptr || m.handler == nullptr) {
        return refuse(CSI_PROXY_STATUS_INVALID_ARGUMENT, std::string(desc.service_name) +
                                                             ": a method without a name "
                                                             "or handler");
      }
      std::string path = "/" + std::string(desc.service_name) + "/" + m.name;
      if (host->FindMethod(path) != nullptr) return refuse(CSI_PROXY_STATUS_ALREADY_EXISTS, path + " registered twice");
      const uint32_t flags =
          desc.method_desc_size >= CSI_PROXY_SIZE_THROUGH(csi_proxy_method_desc, flags) ? m.flags : 0;
      added.push_back({std::move(path), desc.version, flags, m.handler, m.plugin_method_ctx});
    }
    host->methods_.insert(host->methods_.end(), added.begin(), added.end());
    return CSI_PROXY_STATUS_OK;
  }

  static void CompleteCallFn(csi_proxy_host_call* handle, csi_proxy_status_code code, const char* message,
                             size_t message_size, const uint8_t* response, size_t response_size) {
    FakeCall* call = CallOf(handle);
    std::lock_guard lock(call->mu);
    if (++call->completions > 1) return call->findings->Violation(call->path + ": completed twice");
    if (code < CSI_PROXY_STATUS_OK || code > CSI_PROXY_STATUS_UNAUTHENTICATED) {
      call->findings->Violation(call->path + ": completed with status code " + std::to_string(code) +
                                ", which gRPC does not have");
      code = CSI_PROXY_STATUS_UNKNOWN;
    }
    // Both buffers are copied whole, as the host copies them (a short or freed buffer shows under a sanitizer).
    call->code = code;
    if (code != CSI_PROXY_STATUS_OK && message != nullptr) call->message.assign(message, message_size);
    if (code == CSI_PROXY_STATUS_OK && response != nullptr) {
      call->response.assign(reinterpret_cast<const char*>(response), response_size);
    }
    call->done.notify_all();
  }

  static int64_t DeadlineFn(const csi_proxy_host_call* handle) {
    const auto deadline = CallOf(handle)->options.deadline;
    if (deadline == std::chrono::system_clock::time_point::max()) return INT64_MAX;
    return std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count();
  }

  static int32_t IsCancelledFn(const csi_proxy_host_call* handle) {
    const CallOptions& options = CallOf(handle)->options;
    if (options.cancelled && options.cancelled()) return 1;
    return std::chrono::system_clock::now() >= options.deadline ? 1 : 0;
  }

  static void PeerCredentialsFn(const csi_proxy_host_call* handle, csi_proxy_peer_credentials* out) {
    const PeerCredentials& peer = CallOf(handle)->options.peer;
    // Only the fields within the caller's struct_size, as the host writes them.
    if (out == nullptr) return;
    if (out->struct_size >= CSI_PROXY_SIZE_THROUGH(csi_proxy_peer_credentials, pid)) out->pid = peer.pid;
    if (out->struct_size >= CSI_PROXY_SIZE_THROUGH(csi_proxy_peer_credentials, uid)) out->uid = peer.uid;
    if (out->struct_size >= CSI_PROXY_SIZE_THROUGH(csi_proxy_peer_credentials, gid)) out->gid = peer.gid;
  }

  static bool IsGroupName(const std::string& name) {
    if (name.empty() || name.size() > CSI_PROXY_GROUP_NAME_MAX || name[0] < 'a' || name[0] > 'z') return false;
    return std::all_of(name.begin(), name.end(),
                       [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); });
  }

  Status Refuse(const std::string& why) {
    findings_->Violation("negotiation: " + why);
    return FailedPrecondition(why);
  }
  std::string Range() const {
    return "[" + std::to_string(options_.abi_version_min) + ", " + std::to_string(options_.abi_version_max) + "]";
  }
  std::vector<FakeCall*> PendingCalls() const {
    std::vector<FakeCall*> out;
    for (const auto& call : pending_) {
      std::lock_guard lock(call->mu);
      if (call->completions == 0) out.push_back(call.get());
    }
    return out;
  }

  FakeHostOptions options_;
  std::shared_ptr<Findings> findings_;
  LibraryFile library_;
  csi_proxy_plugin_negotiate_fn negotiate_ = nullptr;
  csi_proxy_plugin_api plugin_api_{};
  csi_proxy_host_api api_{};
  std::string config_toml_;
  std::string group_;
  std::string plugin_version_;
  uint32_t abi_version_ = 0;
  void* state_ = nullptr;
  bool in_init_ = false;
  bool initialized_ = false;
  bool shut_down_ = false;
  bool shutdown_refused_ = false;
  std::vector<RegisteredMethod> methods_;
  std::deque<LogLine> log_;                         // guarded by findings_->mu
  std::vector<std::unique_ptr<FakeCall>> pending_;  // not completed within their wait
  std::deque<std::unique_ptr<FakeCall>> retired_;   // the last completed ones
};

}  // namespace csi_proxy::sdk::testing

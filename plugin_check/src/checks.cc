// The checks in the child process (checks.h). Calls go through the host's own call handle, as the router makes
// them: the library completes through the host table LoadPlugin gave it, and the host's Complete and Abandon decide
// who answers. The kit holds every call handle a while after its completion, so that a library completing a call
// twice reaches a live handle, which logs it, and the kit counts that line. The isolated checks hand the same
// handles to the host's RunnerSupervisor, which serves them from the library in csi-proxy-runner.
#include "checks.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/text_format.h>
#include <grpcpp/support/slice.h>
#include <signal.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include "abi/call_handle.h"
#include "abi/library_scope.h"
#include "abi/plugin_loader.h"
#include "config/group_privileges.h"
#include "fuzz_input.h"
#include "isolation/runner_supervisor.h"
#include "process_usage.h"

namespace csi_proxy::plugin_check {
namespace {

namespace pb = google::protobuf;
using Clock = std::chrono::steady_clock;
using std::chrono::duration_cast;
using std::chrono::milliseconds;

// ---- the host's log, watched

// The host logs a second completion of a call ("... was completed twice ..."): the only sign of it, since the
// second completion reaches nobody.
std::atomic<uint64_t> double_completions{0};

class WatchSink : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    std::string_view text(msg.payload.data(), msg.payload.size());
    if (text.find("was completed twice") != std::string_view::npos) double_completions.fetch_add(1);
  }
  void flush_() override {}
};

void WatchHostLog() {
  auto logger = std::make_shared<spdlog::logger>(
      "plugin-check",
      spdlog::sinks_init_list{std::make_shared<spdlog::sinks::stderr_sink_mt>(), std::make_shared<WatchSink>()});
  logger->set_level(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif

// ---- a loaded library

struct Instance {
  host::EndpointRegistry registry;  // LoadPlugin checks registrations against it
  std::unique_ptr<host::LoadedPlugin> plugin;
};

StatusOr<std::unique_ptr<Instance>> Load(const KitConfig& config, const host::HostPresentation& as = {}) {
  auto instance = std::make_unique<Instance>();
  CSI_PROXY_ASSIGN_OR_RETURN(instance->plugin, host::LoadPlugin(config.group, config.host, instance->registry, as));
  return instance;
}

struct Method {
  std::string path;
  host::MethodHandler handler;
  const pb::Descriptor* request_type = nullptr;  // when the library described its services
  const pb::Descriptor* response_type = nullptr;
};

// The methods of a loaded library, with their message types from the descriptors it registered.
class MethodTable {
 public:
  explicit MethodTable(const host::LoadedPlugin& plugin) {
    for (const auto& service : plugin.services()) {
      for (const auto& file : service.file_descriptors) {
        pb::FileDescriptorProto proto;
        if (proto.ParseFromString(file) && pool_.FindFileByName(proto.name()) == nullptr) pool_.BuildFile(proto);
      }
      const pb::ServiceDescriptor* sd = pool_.FindServiceByName(service.service_name);
      for (const auto& [path, handler] : service.methods) {
        Method m{path, handler};
        if (sd != nullptr) {
          if (const pb::MethodDescriptor* md = sd->FindMethodByName(path.substr(path.rfind('/') + 1))) {
            m.request_type = md->input_type();
            m.response_type = md->output_type();
          }
        }
        methods_[path] = m;
      }
    }
  }
  const Method* Find(const std::string& path) const {
    auto it = methods_.find(path);
    return it == methods_.end() ? nullptr : &it->second;
  }
  const std::map<std::string, Method>& all() const { return methods_; }

 private:
  pb::DescriptorPool pool_;
  std::map<std::string, Method> methods_;
};

// ---- one call, as the host makes it

class KitCall : public host::CallAnswerSink {
 public:
  void Answer(csi_proxy_status_code code, std::string_view message, std::string_view response) override {
    std::lock_guard lock(mu);
    answered = true;
    this->code = code;
    this->message = message;
    this->response = response;
    cv.notify_all();
  }
  // Waits until the library completed the call and its handler returned.
  bool WaitDone(milliseconds timeout) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, timeout, [&] { return completed && returned; });
  }
  // Waits for the answer alone: a call sent to a runner, whose handler runs there.
  bool WaitAnswered(milliseconds timeout) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, timeout, [&] { return answered; });
  }

  std::mutex mu;
  std::condition_variable cv;
  bool answered = false;
  bool completed = false;  // the library called complete_call
  bool returned = false;   // the handler returned
  csi_proxy_status_code code = 0;
  std::string message;
  std::string response;
  std::shared_ptr<csi_proxy_host_call> handle;
};

// A call as the router makes it, before it goes to a handler in this process or to a runner.
std::shared_ptr<KitCall> NewCall(const KitConfig& config, const Method& method, const std::string& request,
                                 std::chrono::system_clock::time_point deadline) {
  auto call = std::make_shared<KitCall>();
  host::CallInfo info{config.group.name, method.path, {}, deadline};
  info.peer.pid = getpid();
  info.peer.uid = static_cast<int64_t>(getuid());
  info.peer.gid = static_cast<int64_t>(getgid());
  call->handle = std::make_shared<csi_proxy_host_call>(std::move(info), grpc::Slice(request), call.get());
  return call;
}

// The same, handed to the library in this process.
std::shared_ptr<KitCall> MakeCall(const KitConfig& config, const Method& method, const std::string& request,
                                  std::chrono::system_clock::time_point deadline) {
  auto call = NewCall(config, method, request, deadline);
  call->handle->HandOverToPlugin(call->handle, [call] {
    std::lock_guard lock(call->mu);
    call->completed = true;
    call->cv.notify_all();
  });
  return call;
}

// Runs the handler on this thread, as one of the group's workers would.
void RunHandler(const KitConfig& config, const Method& method, KitCall& call) {
  std::string_view request = call.handle->request();
  {
    host::LibraryScope scope(config.group.name.c_str(), method.path.c_str());
    method.handler.fn(method.handler.plugin_method_ctx, call.handle.get(),
                      reinterpret_cast<const uint8_t*>(request.data()), request.size());
  }
  std::lock_guard lock(call.mu);
  call.returned = true;
  call.cv.notify_all();
}

std::chrono::system_clock::time_point DeadlineIn(milliseconds from_now) {
  return std::chrono::system_clock::now() + from_now;
}

std::string CodeText(csi_proxy_status_code code) { return CodeName(code); }

// What is wrong with an answered call, or "".
std::string JudgeAnswer(const KitCall& call, const Method& method) {
  if (call.code < 0 || call.code > CSI_PROXY_STATUS_UNAUTHENTICATED) {
    return "completed with status code " + std::to_string(call.code) + ", which gRPC does not have";
  }
  if (call.answered && call.code == CSI_PROXY_STATUS_OK && method.response_type != nullptr) {
    pb::DynamicMessageFactory factory;
    std::unique_ptr<pb::Message> response(factory.GetPrototype(method.response_type)->New());
    if (!response->ParseFromString(call.response)) {
      return "answered OK with a response that does not parse as " + method.response_type->full_name();
    }
  }
  return "";
}

// A fuzzed call's deadline: a library that heeds deadlines ends a slow input within it; one that does not still has
// the call timeout to complete it.
constexpr milliseconds kFuzzDeadline{1000};
// How long past a call's deadline the isolated checks wait for the runner's answer before they answer it.
constexpr milliseconds kHopBack{5000};

std::string Describe(uint64_t index, const FuzzInput& in) {
  return "input #" + std::to_string(index) + " (" + in.kind + ", " + std::to_string(in.bytes.size()) + " bytes)";
}

// Whether an error message is the kernel's refusal of an operation (strerror of EPERM or EACCES), as a library
// passes it on.
bool MentionsDenial(const std::string& message) {
  for (const char* text : {"Operation not permitted", "Permission denied", "EPERM", "EACCES"}) {
    if (message.find(text) != std::string::npos) return true;
  }
  return false;
}

std::string Quoted(const std::string& message) { return message.empty() ? "" : " \"" + message + "\""; }

// What is left of the runner `pid` after its supervisor stopped it: "" when nothing is (it was reaped), else what.
// A process of that pid with another parent is not the runner (the pid was reused).
std::string LeftOfRunner(pid_t pid) {
  if (pid <= 0 || (kill(pid, 0) != 0 && errno == ESRCH)) return "";
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  const size_t name_end = stat.rfind(')');
  if (name_end == std::string::npos) return "";
  std::istringstream fields(stat.substr(name_end + 1));
  char state = 0;
  long long parent = 0;
  fields >> state >> parent;
  if (parent != getpid()) return "";
  return state == 'Z' ? "is a zombie: its supervisor did not reap it" : "is still running";
}

std::string Hex(const std::string& bytes, size_t max) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < bytes.size() && i < max; ++i) {
    out += digits[static_cast<unsigned char>(bytes[i]) >> 4];
    out += digits[static_cast<unsigned char>(bytes[i]) & 15];
  }
  return bytes.size() > max ? out + "..." : out;
}

struct Result {
  const char* outcome = "FAIL";  // PASS, FAIL, SKIP
  std::string detail;
};
Result Pass(std::string d) { return {"PASS", std::move(d)}; }
Result Fail(std::string d) { return {"FAIL", std::move(d)}; }

// The request a check sends a method when it needs one that is not fuzz: the configured one, else the empty one.
StatusOr<std::string> SampleRequest(const KitConfig& config, const Method& method) {
  auto it = config.requests.find(method.path);
  if (it == config.requests.end()) return std::string();
  if (method.request_type == nullptr) {
    return InvalidArgument("[check.requests] gives " + method.path +
                           " a request, but the library describes no message types (a version-1 library)");
  }
  pb::DynamicMessageFactory factory;
  std::unique_ptr<pb::Message> m(factory.GetPrototype(method.request_type)->New());
  if (!pb::TextFormat::ParseFromString(it->second, m.get())) {
    return InvalidArgument("[check.requests] " + method.path + " does not parse as " +
                           method.request_type->full_name() + " in protobuf text format");
  }
  return m->SerializeAsString();
}

// ---- the checks

class Checker {
 public:
  Checker(const RunSettings& settings, const ChildChannel& channel)
      : s_(settings), config_(settings.config), ch_(channel) {}

  Result Run(const CheckItem& item) {
    switch (item.kind) {
      case CheckKind::kAbiNewest:
        return AbiNewest();
      case CheckKind::kAbiOldest:
        return AbiOldest();
      case CheckKind::kInitTwice:
        return InitTwice();
      case CheckKind::kReloadTwice:
        return ReloadTwice();
      case CheckKind::kFdLeak:
        return FdLeak();
      case CheckKind::kMemoryGrowth:
        return MemoryGrowth();
      default:
        break;
    }
    if (!served_) {
      auto loaded = Load(config_);
      if (!loaded.ok()) return Fail("the library did not load: " + loaded.status().message());
      served_ = std::move(*loaded);
      table_ = std::make_unique<MethodTable>(*served_->plugin);
    }
    if (item.kind == CheckKind::kIsolatedStart) return IsolatedStart();
    if (item.kind == CheckKind::kIsolatedStop) return IsolatedStop();
    const Method* method = table_->Find(item.method);
    if (method == nullptr) return Fail("the library did not register " + item.method + " this time");
    switch (item.kind) {
      case CheckKind::kFuzz:
        return Fuzz(*method);
      case CheckKind::kDeadline:
        return Deadline(*method);
      case CheckKind::kIsolatedCalls:
        return IsolatedCalls(*method);
      default:
        return Concurrent(*method);
    }
  }

 private:
  Result AbiNewest() {
    auto loaded = Load(config_);
    if (!loaded.ok()) return Fail(loaded.status().message());
    const host::LoadedPlugin& p = *loaded.value()->plugin;
    size_t methods = 0, read_only = 0, non_blocking = 0;
    for (const auto& service : p.services()) {
      for (const auto& [path, handler] : service.methods) {
        SendLine(ch_, "M " + std::to_string(handler.flags) + " " + path);
        ++methods;
        read_only += handler.read_only();
        non_blocking += handler.non_blocking();
      }
    }
    std::string detail = "negotiated ABI version " + std::to_string(p.abi_version()) + " (offered " +
                         std::to_string(host::kAbiVersionMin) + " to " + std::to_string(host::kAbiVersionMax) +
                         "); library version " + p.plugin_version() + "; " + std::to_string(p.services().size()) +
                         " services, " + std::to_string(methods) + " methods (" + std::to_string(read_only) +
                         " read-only, " + std::to_string(non_blocking) + " non-blocking)";
    loaded.value().reset();
    return Pass(detail);
  }

  Result AbiOldest() {
    host::HostPresentation oldest{CSI_PROXY_ABI_VERSION_1, CSI_PROXY_ABI_VERSION_1, CSI_PROXY_HOST_API_V1_SIZE};
    auto loaded = Load(config_, oldest);
    if (!loaded.ok()) return Fail("a host of ABI version 1 cannot load it: " + loaded.status().message());
    const host::LoadedPlugin& p = *loaded.value()->plugin;
    if (p.abi_version() != CSI_PROXY_ABI_VERSION_1) {
      return Fail("answered ABI version " + std::to_string(p.abi_version()) + " to a host that offered only 1");
    }
    size_t methods = 0;
    for (const auto& service : p.services()) methods += service.methods.size();
    loaded.value().reset();
    return Pass("negotiated ABI version 1 with a host table of version 1's " +
                std::to_string(CSI_PROXY_HOST_API_V1_SIZE) + " bytes; " + std::to_string(methods) +
                " methods registered; shut down");
  }

  // A method safe to call with the empty request under this configuration: read-only and not skipped.
  const Method* SafeMethod(const MethodTable& table) const {
    for (const auto& [path, m] : table.all()) {
      if ((m.handler.read_only() || config_.read_only_methods.count(path) > 0) && config_.skip.count(path) == 0 &&
          config_.skip.count(path.substr(path.rfind('/') + 1)) == 0) {
        return &m;
      }
    }
    return nullptr;
  }

  // One call of a safe method on a freshly loaded instance, "" when it was answered as it should be.
  std::string Exercise(const Instance& instance) {
    MethodTable table(*instance.plugin);
    const Method* m = SafeMethod(table);
    exercised_ = m != nullptr ? m->path : "";
    if (m == nullptr) return "";
    auto request = SampleRequest(config_, *m);
    if (!request.ok()) return request.status().message();
    auto call = MakeCall(config_, *m, *request, DeadlineIn(config_.call_timeout));
    SetNote(ch_, "a call of " + m->path);
    RunHandler(config_, *m, *call);
    if (!call->WaitDone(config_.call_timeout)) return m->path + " was not completed within the call timeout";
    std::string wrong = JudgeAnswer(*call, *m);
    return wrong.empty() ? "" : m->path + " " + wrong;
  }

  std::string Called() const {
    return exercised_.empty() ? "not called (no read-only method to call)" : "called (" + exercised_ + ")";
  }

  Result InitTwice() {
    std::vector<std::string> paths[2];
    for (int round = 0; round < 2; ++round) {
      SetNote(ch_, "load and init number " + std::to_string(round + 1));
      auto loaded = Load(config_);
      if (!loaded.ok()) return Fail("init number " + std::to_string(round + 1) + ": " + loaded.status().message());
      for (const auto& service : loaded.value()->plugin->services()) {
        for (const auto& [path, handler] : service.methods) paths[round].push_back(path);
      }
      if (std::string wrong = Exercise(**loaded); !wrong.empty()) {
        return Fail("after init number " + std::to_string(round + 1) + ": " + wrong);
      }
      SetNote(ch_, "shutdown and unload number " + std::to_string(round + 1));
      loaded.value().reset();
    }
    if (paths[0] != paths[1]) return Fail("the second init registered other methods than the first");
    return Pass("loaded, initialised, " + Called() + ", shut down and unloaded twice in one process");
  }

  Result ReloadTwice() {
    SetNote(ch_, "the first instance");
    auto serving = Load(config_);
    if (!serving.ok()) return Fail(serving.status().message());
    std::unique_ptr<Instance> old = std::move(*serving);
    for (int round = 1; round <= 2; ++round) {
      SetNote(ch_, "reload " + std::to_string(round) + ": init of the new instance beside the old");
      auto next = Load(config_);
      if (!next.ok()) {
        return Fail("reload " + std::to_string(round) +
                    ": the new instance, loaded beside the serving one: " + next.status().message());
      }
      if (std::string wrong = Exercise(**next); !wrong.empty()) {
        return Fail("reload " + std::to_string(round) + ": " + wrong);
      }
      SetNote(ch_, "reload " + std::to_string(round) + ": shutdown of the old instance");
      old = std::move(*next);
    }
    SetNote(ch_, "shutdown of the last instance");
    old.reset();
    return Pass("a new instance initialised beside the serving one, " + Called() +
                ", and the old one shut down, twice");
  }

  // N reloads after a warm-up one; what they left behind is measured once for both leak checks.
  Status Reloads() {
    if (reloads_done_) return Status::Ok();
    {
      SetNote(ch_, "warm-up reload");
      CSI_PROXY_ASSIGN_OR_RETURN(auto a, Load(config_));
      CSI_PROXY_ASSIGN_OR_RETURN(auto b, Load(config_));
      a.reset();
      b.reset();
    }
    fds_before_ = OpenFileDescriptors();
    rss_before_ = ResidentBytesInUse();
    {
      CSI_PROXY_ASSIGN_OR_RETURN(auto old, Load(config_));
      for (int i = 0; i < config_.reloads; ++i) {
        SetNote(ch_, "reload " + std::to_string(i + 1) + " of " + std::to_string(config_.reloads));
        CSI_PROXY_ASSIGN_OR_RETURN(auto next, Load(config_));
        if (std::string wrong = Exercise(*next); !wrong.empty()) return Internal(wrong);
        old = std::move(next);
      }
    }
    fds_after_ = OpenFileDescriptors();
    rss_after_ = ResidentBytesInUse();
    reloads_done_ = true;
    return Status::Ok();
  }

  Result FdLeak() {
    if (Status s = Reloads(); !s.ok()) return Fail(s.message());
    std::vector<std::string> leaked;
    for (const auto& [fd, target] : fds_after_) {
      auto before = fds_before_.find(fd);
      if (before == fds_before_.end() || before->second != target)
        leaked.push_back(std::to_string(fd) + " -> " + target);
    }
    const std::string what = std::to_string(config_.reloads) + " reloads";
    if (leaked.empty()) return Pass(what + " left no descriptor open (" + std::to_string(fds_after_.size()) + " open)");
    std::string list;
    for (size_t i = 0; i < leaked.size() && i < 8; ++i) list += (i ? ", " : "") + leaked[i];
    if (leaked.size() > 8) list += ", ...";
    return Fail(what + " left " + std::to_string(leaked.size()) +
                " file descriptors open that were not before: " + list + " (init opened what shutdown did not close)");
  }

  Result MemoryGrowth() {
    if (kAddressSanitizer) {
      return {"SKIP",
              "resident memory is not measured in a build with AddressSanitizer (its quarantine keeps what "
              "a library frees)"};
    }
    if (Status s = Reloads(); !s.ok()) return Fail(s.message());
    if (rss_before_ < 0 || rss_after_ < 0) return {"SKIP", "resident memory cannot be read on this system"};
    const int64_t growth = rss_after_ - rss_before_;
    auto mib = [](int64_t b) {
      std::ostringstream out;
      out.precision(1);
      out << std::fixed << static_cast<double>(b) / (1 << 20) << " MiB";
      return out.str();
    };
    std::string detail = "resident memory grew by " + mib(growth) + " across " + std::to_string(config_.reloads) +
                         " reloads (from " + mib(rss_before_) + "; limit " + mib(config_.rss_growth_limit_bytes) +
                         ", [check] rss_growth_limit_mib)";
    return growth > config_.rss_growth_limit_bytes ? Fail(detail + ": shutdown does not free what init took")
                                                   : Pass(detail);
  }

  // The generated requests of `m`: paths under the kubelet path and the working directories at times, none longer
  // than the host would hand the library.
  FuzzInputs InputsFor(const Method& m, const std::string& sample) const {
    std::vector<std::string> roots{config_.host.kubelet_path};
    roots.insert(roots.end(), config_.host.working_dirs.begin(), config_.host.working_dirs.end());
    return FuzzInputs(s_.seed, m.path, m.request_type, sample, std::move(roots),
                      static_cast<size_t>(config_.group.max_request_bytes));
  }

  Result Fuzz(const Method& m) {
    auto sample = SampleRequest(config_, m);
    if (!sample.ok()) return Fail(sample.status().message());
    FuzzInputs inputs = InputsFor(m, *sample);
    std::map<std::string, int> codes;
    std::deque<std::shared_ptr<KitCall>> recent;  // alive a while, so that a second completion finds its handle
    const auto start = Clock::now();
    const uint64_t twice_at_start = double_completions.load();
    uint64_t count = 0;
    for (uint64_t i = s_.only_input >= 0 ? static_cast<uint64_t>(s_.only_input) : 0;; ++i) {
      // At least 16 inputs, unless they are slow: the share of time and one call's timeout are the most.
      const auto spent = Clock::now() - start;
      if (s_.only_input >= 0 ? count == 1
                             : spent >= s_.fuzz_time && (count >= 16 || spent >= s_.fuzz_time + config_.call_timeout)) {
        break;
      }
      const FuzzInput in = inputs.Make(i);
      const std::string what = Describe(i, in);
      SetNote(ch_, what + (s_.only_input >= 0 ? ", hex " + Hex(in.bytes, 64) : ""));
      const uint64_t twice_before = double_completions.load();
      auto call = MakeCall(config_, m, in.bytes, DeadlineIn(std::min(kFuzzDeadline, config_.call_timeout)));
      RunHandler(config_, m, *call);
      if (!call->WaitDone(config_.call_timeout)) {
        return Fail(what + " was not completed within " + std::to_string(config_.call_timeout.count() / 1000) +
                    " s: the handler returned without calling complete_call");
      }
      recent.push_back(call);
      if (recent.size() > 64) recent.pop_front();
      if (double_completions.load() != twice_before) return Fail(what + " was completed twice");
      if (std::string wrong = JudgeAnswer(*call, m); !wrong.empty()) return Fail(what + " " + wrong);
      ++codes[CodeText(call->code)];
      ++count;
    }
    usleep(20000);  // a late second completion of the last inputs
    if (double_completions.load() != twice_at_start) return Fail("one of the last inputs was completed twice");
    std::string histogram;
    for (const auto& [code, n] : codes) histogram += (histogram.empty() ? "" : ", ") + code + " " + std::to_string(n);
    const auto ms = duration_cast<milliseconds>(Clock::now() - start).count();
    return Pass(std::to_string(count) + " inputs answered in " + std::to_string(ms) + " ms (" + histogram + ")");
  }

  Result Deadline(const Method& m) {
    auto request = SampleRequest(config_, m);
    if (!request.ok()) return Fail(request.status().message());
    const uint64_t twice_before = double_completions.load();
    int calls = 0;
    milliseconds latest_after_deadline{0};
    const milliseconds short_deadlines[] = {milliseconds(0), milliseconds(1), milliseconds(5), milliseconds(20)};
    for (int round = 0; round < 3; ++round) {
      // Answered by the host at the deadline while the handler runs, as the host's timer does.
      for (milliseconds d : short_deadlines) {
        SetNote(ch_, m.path + " with a deadline of " + std::to_string(d.count()) + " ms");
        const auto deadline = DeadlineIn(d);
        auto call = MakeCall(config_, m, *request, deadline);
        std::thread worker([this, &m, call] { RunHandler(config_, m, *call); });
        std::this_thread::sleep_until(deadline);
        call->handle->Abandon(CSI_PROXY_STATUS_DEADLINE_EXCEEDED, "deadline exceeded (csi-proxy-plugin-check)");
        if (!call->WaitDone(config_.call_timeout)) {
          worker.detach();
          return Fail("a call whose deadline (" + std::to_string(d.count()) +
                      " ms) the host answered first was not completed by the library within the call timeout");
        }
        worker.join();
        latest_after_deadline =
            std::max(latest_after_deadline, duration_cast<milliseconds>(std::chrono::system_clock::now() - deadline));
        ++calls;
      }
      // Cancelled by the client before the handler started.
      SetNote(ch_, m.path + " cancelled before its handler ran");
      auto call = MakeCall(config_, m, *request, DeadlineIn(config_.call_timeout));
      call->handle->Abandon(CSI_PROXY_STATUS_CANCELLED, "cancelled (csi-proxy-plugin-check)");
      RunHandler(config_, m, *call);
      if (!call->WaitDone(config_.call_timeout)) {
        return Fail("a call the client cancelled before its handler ran was not completed by the library");
      }
      ++calls;
    }
    usleep(20000);
    if (double_completions.load() != twice_before) {
      return Fail(
          "the library completed a call twice after the host had answered it (at its deadline or "
          "cancellation): complete_call must be called exactly once");
    }
    return Pass(std::to_string(calls) +
                " calls answered by the host first (deadline or cancellation) were completed "
                "once each, the last " +
                std::to_string(latest_after_deadline.count()) + " ms after its deadline");
  }

  Result Concurrent(const Method& m) {
    auto request = SampleRequest(config_, m);
    if (!request.ok()) return Fail(request.status().message());
    const uint64_t twice_before = double_completions.load();
    std::mutex mu;
    std::string failure;
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    // Every call, until the check ends: a second completion finds its handle.
    std::vector<std::vector<std::shared_ptr<KitCall>>> kept(static_cast<size_t>(config_.threads));
    SetNote(ch_, std::to_string(config_.threads) + " threads calling " + m.path);
    for (int t = 0; t < config_.threads; ++t) {
      threads.emplace_back([&, mine = &kept[static_cast<size_t>(t)]] {
        while (!go.load()) std::this_thread::yield();
        for (int c = 0; c < config_.calls_per_thread; ++c) {
          auto call = mine->emplace_back(MakeCall(config_, m, *request, DeadlineIn(config_.call_timeout)));
          RunHandler(config_, m, *call);
          std::string wrong =
              call->WaitDone(config_.call_timeout) ? JudgeAnswer(*call, m) : "was not completed in time";
          if (!wrong.empty()) {
            std::lock_guard lock(mu);
            if (failure.empty()) failure = "a concurrent call " + wrong;
            return;
          }
        }
      });
    }
    const auto start = Clock::now();
    go = true;
    for (auto& t : threads) t.join();
    if (!failure.empty()) return Fail(failure);
    usleep(20000);  // a late second completion
    if (double_completions.load() != twice_before) return Fail("a concurrent call was completed twice");
    return Pass(std::to_string(config_.threads) + " threads x " + std::to_string(config_.calls_per_thread) +
                " calls answered in " + std::to_string(duration_cast<milliseconds>(Clock::now() - start).count()) +
                " ms");
  }

  // ---- the library in csi-proxy-runner, as an isolated group is served

  // Starts the group's runner as the host does for isolation = "process", unless one serves already.
  // A start that failed once is not tried again: the checks after it are skipped, naming it.
  Status StartRunner() {
    if (runner_) return Status::Ok();
    SetNote(ch_, "the start of csi-proxy-runner");
    auto started = host::RunnerSupervisor::Start(config_.group, config_.host, Clock::now() + config_.host.load_timeout);
    if (!started.ok()) {
      if (KitLacksPrivileges(started.status())) {
        runner_skip_ =
            "the kit cannot confine the runner as the group's privileges say, so the library was not "
            "loaded in it (run the kit as root, as the host runs): " +
            started.status().message();
      } else {
        runner_skip_ = "not run: the library was not served in csi-proxy-runner (a failed check above says why)";
      }
      return started.status();
    }
    runner_ = std::move(*started);
    runner_pid_ = runner_->usage().pid;
    return Status::Ok();
  }

  // The runner holds what the kit holds: a confinement it cannot apply ("this process does not hold CAP_...", a
  // limit "above this process's own hard limit") is the kit's lack, not the library's.
  static bool KitLacksPrivileges(const Status& start) {
    return start.code() == Code::kFailedPrecondition && start.message().find("this process") != std::string::npos;
  }

  // The result of a check that needs a runner when none could be started: the start's failure the first time.
  Result NoRunner(const Status& start) {
    if (KitLacksPrivileges(start)) return {"SKIP", runner_skip_};
    return Fail("the library was not served in csi-proxy-runner (" + host::RunnerSupervisor::RunnerPath() +
                "): " + start.message());
  }

  std::string Runner() const { return "the runner (pid " + std::to_string(runner_pid_) + ")"; }

  // Stops the runner as the host stops an isolated group (its library shut down, then the process ends), within
  // the host's shutdown_timeout; what was wrong with how it ended, or "". `after_failure`: the runner may have
  // ended already (the check failed on that), and only what is left of it is wrong. The next check starts a new one.
  std::string StopRunner(bool after_failure = false) {
    if (!runner_) return "";
    SetNote(ch_, "the stop of " + Runner());
    const std::string runner = Runner();
    // A runner the supervisor restarted after one ended is another process.
    std::vector<pid_t> pids{runner_pid_};
    if (pid_t now = runner_->usage().pid; now != 0 && now != runner_pid_) pids.push_back(now);
    runner_->Stop(Clock::now() + config_.host.shutdown_timeout);
    const host::RunnerUsage after = runner_->usage();
    runner_.reset();
    std::string wrong;
    // The supervisor's words for a runner that shut its library down and exited by itself.
    if (!after_failure && after.last_exit != "exited with status 0") {
      wrong = runner + " did not shut down cleanly when stopped: it " +
              (after.last_exit.empty() ? std::string("never ended") : after.last_exit);
    }
    for (pid_t pid : pids) {
      if (std::string left = LeftOfRunner(pid); !left.empty()) {
        wrong += (wrong.empty() ? "" : "; ") + std::string("the runner (pid ") + std::to_string(pid) + ") " + left +
                 " after the stop";
      }
    }
    return wrong;
  }

  // A failed check's end: the runner is stopped, and the next check starts a new one.
  Result FailAndStop(std::string detail) {
    if (std::string wrong = StopRunner(true); !wrong.empty()) detail += "; stopping it: " + wrong;
    return Fail(detail);
  }

  Result IsolatedStart() {
    if (!runner_skip_.empty()) return {"SKIP", runner_skip_};
    if (Status started = StartRunner(); !started.ok()) return NoRunner(started);
    const host::RunnerDescription& d = runner_->description();
    std::vector<std::string> in_runner = d.method_paths, in_process;
    for (const auto& [path, m] : table_->all()) in_process.push_back(path);
    std::sort(in_runner.begin(), in_runner.end());
    if (in_runner != in_process) {
      return FailAndStop("the library registered " + std::to_string(in_runner.size()) + " methods in the runner and " +
                         std::to_string(in_process.size()) +
                         " in the kit's process: its registration depends on where it runs");
    }
    return Pass(Runner() + " confined itself (" + host::DescribePrivileges(config_.group.privileges) +
                "), loaded the library (ABI version " + std::to_string(d.abi_version) + ") and described the " +
                std::to_string(in_runner.size()) + " methods it registers in the kit's process");
  }

  // The method's sample request and its first fuzz inputs through the runner. An error the runner answered is
  // compared with the same request's answer in this process, which holds the kit's own privileges: an answer
  // that differs, or that only there carries the kernel's refusal, is something the group's privileges deny.
  Result IsolatedCalls(const Method& m) {
    if (!runner_skip_.empty()) return {"SKIP", runner_skip_};
    if (Status started = StartRunner(); !started.ok()) return NoRunner(started);
    const auto& paths = runner_->description().method_paths;
    const auto at = std::find(paths.begin(), paths.end(), m.path);
    if (at == paths.end()) return Fail("the library did not register " + m.path + " in the runner");
    const uint32_t index = static_cast<uint32_t>(at - paths.begin());
    auto sample = SampleRequest(config_, m);
    if (!sample.ok()) return Fail(sample.status().message());
    FuzzInputs inputs = InputsFor(m, *sample);
    std::vector<std::pair<std::string, std::string>> requests{{"the sample request", *sample}};
    for (uint64_t i = 0; i < kIsolatedFuzzInputs; ++i) {
      FuzzInput in = inputs.Make(i);
      requests.emplace_back(Describe(i, in), std::move(in.bytes));
    }
    const uint64_t twice_before = double_completions.load();
    std::map<std::string, int> codes;
    const auto start = Clock::now();
    for (const auto& [what, bytes] : requests) {
      SetNote(ch_, m.path + " through " + Runner() + ", " + what);
      auto call = NewCall(config_, m, bytes, DeadlineIn(config_.call_timeout));
      runner_->Send(index, call->handle);
      // The deadline, and some seconds for the hop back on a loaded machine (an answer at the deadline comes at
      // once on a quiet one). Unanswered, the call is answered here, as the host's timer does, so that nothing
      // reaches `call` once it is gone.
      const bool answered = call->WaitAnswered(config_.call_timeout + kHopBack);
      if (!answered) {
        call->handle->Abandon(CSI_PROXY_STATUS_DEADLINE_EXCEEDED, "deadline exceeded (csi-proxy-plugin-check)");
      }
      const host::RunnerUsage usage = runner_->usage();
      if (!usage.last_exit.empty() || usage.restarts > 0) {
        std::string detail = Runner() + " ended (" + usage.last_exit + "), during " + what;
        if (answered) detail += "; the call was answered " + CodeText(call->code) + Quoted(call->message);
        return FailAndStop(detail);
      }
      if (!answered) {
        return FailAndStop(what + " was not answered by " + Runner() + " within " +
                           std::to_string(config_.call_timeout.count() / 1000) + " s (its deadline)");
      }
      if (std::string wrong = JudgeAnswer(*call, m); !wrong.empty()) {
        return FailAndStop(what + ", through the runner, " + wrong);
      }
      if (call->code != CSI_PROXY_STATUS_OK) {
        SetNote(ch_, m.path + " in the kit's process, " + what);
        auto reference = MakeCall(config_, m, bytes, DeadlineIn(config_.call_timeout));
        RunHandler(config_, m, *reference);
        if (reference->WaitDone(config_.call_timeout) &&
            (reference->code != call->code || (MentionsDenial(call->message) && !MentionsDenial(reference->message)))) {
          return FailAndStop(what + " was answered " + CodeText(call->code) + Quoted(call->message) + " by " +
                             Runner() + " and " + CodeText(reference->code) + Quoted(reference->message) +
                             " in the kit's own process: the group's privileges (" +
                             host::DescribePrivileges(config_.group.privileges) +
                             ") deny the library what it needs; declare it in [groups." + config_.group.name +
                             "] (docs/configuration.md, \"Privileges of an isolated group\")");
        }
      }
      ++codes[CodeText(call->code)];
    }
    usleep(20000);  // a late second completion, which the runner's host code logs, and the runner to the kit
    if (double_completions.load() != twice_before) return FailAndStop("a call through the runner was completed twice");
    std::string histogram;
    for (const auto& [code, n] : codes) histogram += (histogram.empty() ? "" : ", ") + code + " " + std::to_string(n);
    return Pass(std::to_string(requests.size()) + " requests (the sample and fuzz inputs 0 to " +
                std::to_string(kIsolatedFuzzInputs - 1) + ") answered by " + Runner() + " in " +
                std::to_string(duration_cast<milliseconds>(Clock::now() - start).count()) + " ms (" + histogram +
                "), errors as in the kit's process; it was never restarted");
  }

  Result IsolatedStop() {
    if (!runner_skip_.empty()) return {"SKIP", runner_skip_};
    if (Status started = StartRunner(); !started.ok()) return NoRunner(started);
    const host::RunnerUsage usage = runner_->usage();
    if (!usage.last_exit.empty() || usage.restarts > 0) {
      return FailAndStop(Runner() + " ended (" + usage.last_exit + ") and was restarted " +
                         std::to_string(usage.restarts) + " times before its stop");
    }
    const std::string runner = Runner();
    const auto start = Clock::now();
    if (std::string wrong = StopRunner(); !wrong.empty()) return Fail(wrong);
    return Pass(runner + " shut the library down and exited with status 0 in " +
                std::to_string(duration_cast<milliseconds>(Clock::now() - start).count()) + " ms (shutdown_timeout " +
                std::to_string(config_.host.shutdown_timeout.count() / 1000) +
                " s), never restarted; no process and no zombie are left");
  }

  const RunSettings& s_;
  const KitConfig& config_;
  const ChildChannel& ch_;
  std::unique_ptr<host::RunnerSupervisor> runner_;  // the isolated checks' runner, while one serves
  pid_t runner_pid_ = 0;
  std::string runner_skip_;           // why the runner cannot serve the library here, once known
  std::unique_ptr<Instance> served_;  // the instance the per-method checks call
  std::unique_ptr<MethodTable> table_;
  std::string exercised_;  // the method the lifecycle checks called, if any
  bool reloads_done_ = false;
  std::map<int, std::string> fds_before_, fds_after_;
  int64_t rss_before_ = -1, rss_after_ = -1;
};

std::string OneLine(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  return s;
}

milliseconds Budget(const CheckItem& item, const RunSettings& s) {
  const KitConfig& c = s.config;
  switch (item.kind) {
    case CheckKind::kFuzz:
      return s.fuzz_time + 2 * c.call_timeout + milliseconds(5000);
    case CheckKind::kDeadline:
      return 13 * c.call_timeout + milliseconds(5000);
    case CheckKind::kConcurrent:
      return c.calls_per_thread * c.call_timeout + milliseconds(5000);
    case CheckKind::kFdLeak:
    case CheckKind::kMemoryGrowth:
      return (c.reloads + 3) * (LoadBudget(c) + c.call_timeout);
    case CheckKind::kIsolatedCalls:
      // A runner's start, then each request through it and perhaps in this process, and a stop after a failure.
      return 2 * LoadBudget(c) + static_cast<int64_t>(kIsolatedFuzzInputs + 1) * (2 * c.call_timeout + kHopBack) +
             duration_cast<milliseconds>(c.host.shutdown_timeout);
    case CheckKind::kIsolatedStop:
      return 2 * LoadBudget(c) + duration_cast<milliseconds>(c.host.shutdown_timeout) + milliseconds(5000);
    default:
      return 4 * (LoadBudget(c) + c.call_timeout);
  }
}

}  // namespace

milliseconds LoadBudget(const KitConfig& config) {
  return duration_cast<milliseconds>(config.host.load_timeout) + milliseconds(5000);
}

void RunChecks(const std::vector<CheckItem>& items, size_t from, const RunSettings& settings,
               const ChildChannel& channel) {
  WatchHostLog();
  Checker checker(settings, channel);
  for (size_t i = from; i < items.size(); ++i) {
    SendLine(channel, "S " + std::to_string(i) + " " + std::to_string(Budget(items[i], settings).count()));
    SetNote(channel, "");
    Result r;
    try {
      r = checker.Run(items[i]);
    } catch (const std::exception& e) {
      r = Fail(std::string("an exception reached the host's side: ") + e.what());
    }
    SendLine(channel, "R " + std::to_string(i) + " " + r.outcome + " " + OneLine(r.detail));
    if (r.outcome == std::string("FAIL") &&
        (items[i].kind == CheckKind::kFuzz || items[i].kind == CheckKind::kDeadline ||
         items[i].kind == CheckKind::kConcurrent)) {
      // A call may still run in the library: the next checks start in a fresh process.
      std::fflush(nullptr);
      _exit(kExitForAFreshProcess);
    }
  }
}

}  // namespace csi_proxy::plugin_check

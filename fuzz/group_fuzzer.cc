// Fuzzes one API-group library through the C ABI, the way the host drives it: dlopen() the library, negotiate,
// init with a small fake host table whose configuration points kubelet_path, working_dirs and state_dir at a
// scratch directory (/tmp/csi-proxy-fuzz/<group>, removed at exit), then for every input call one registered
// handler (the first byte picks the method among every version's, in registration order) with the rest of the
// input as the serialized request. Every call must complete
// exactly once, within a bound, with a status code gRPC knows. The library is chosen at build time
// (CSI_PROXY_FUZZ_GROUP_LIBRARY): the shipped filesystem library, or a group built with a recording OS layer
// (fuzz/recording_*.cc) where acting for real would be unsafe.
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "csi_proxy/plugin_abi.h"

struct csi_proxy_host_call {
  std::mutex mutex;
  std::condition_variable completed_cv;
  int completions = 0;
  csi_proxy_status_code code = -1;
  std::string method;
};

namespace {

struct Method {
  std::string path;  // /<service>/<name>
  csi_proxy_plugin_handler_fn handler;
  void* ctx;
};

struct Harness {
  std::string scratch;
  std::string config_toml;
  std::vector<Method> methods;
  csi_proxy_host_api host_api{};
  const csi_proxy_plugin_api* plugin_api = nullptr;
  void* plugin_state = nullptr;
  bool in_init = false;
};

Harness* harness = nullptr;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "group_fuzzer: %s\n", what.c_str());
  std::abort();
}

void Log(csi_proxy_host_context*, csi_proxy_log_level level, const char* message, size_t size) {
  if (level < CSI_PROXY_LOG_TRACE || level > CSI_PROXY_LOG_ERROR) Fail("log level out of range");
  if (size > 0 && message == nullptr) Fail("log message is null");
  if (std::getenv("CSI_PROXY_FUZZ_VERBOSE")) std::fprintf(stderr, "[plugin] %.*s\n", static_cast<int>(size), message);
}

csi_proxy_status_code RegisterService(csi_proxy_host_context*, const csi_proxy_service_desc* service) {
  if (!harness->in_init) return CSI_PROXY_STATUS_FAILED_PRECONDITION;
  if (service == nullptr || service->struct_size < CSI_PROXY_SERVICE_DESC_V1_SIZE) Fail("truncated service desc");
  const auto* bytes = reinterpret_cast<const uint8_t*>(service->methods);
  for (size_t i = 0; i < service->method_count; ++i) {
    csi_proxy_method_desc method{};
    std::memcpy(&method, bytes + i * service->method_desc_size,
                std::min(service->method_desc_size, sizeof(csi_proxy_method_desc)));
    if (method.name == nullptr || method.handler == nullptr) Fail("method without a name or handler");
    harness->methods.push_back(
        {"/" + std::string(service->service_name) + "/" + method.name, method.handler, method.plugin_method_ctx});
  }
  return CSI_PROXY_STATUS_OK;
}

void CompleteCall(csi_proxy_host_call* call, csi_proxy_status_code code, const char* message, size_t message_size,
                  const uint8_t* response, size_t response_size) {
  if (code < CSI_PROXY_STATUS_OK || code > CSI_PROXY_STATUS_UNAUTHENTICATED) Fail(call->method + ": bad status code");
  // The host copies both buffers: read them all, so a dangling or short buffer shows under ASan.
  volatile uint8_t sink = 0;
  for (size_t i = 0; code != CSI_PROXY_STATUS_OK && i < message_size; ++i) sink = sink ^ message[i];
  for (size_t i = 0; code == CSI_PROXY_STATUS_OK && i < response_size; ++i) sink = sink ^ response[i];
  (void)sink;
  std::lock_guard lock(call->mutex);
  if (++call->completions > 1) Fail(call->method + ": completed twice");
  call->code = code;
  call->completed_cv.notify_all();
}

int64_t Deadline(const csi_proxy_host_call*) {
  auto in = std::chrono::system_clock::now() + std::chrono::seconds(10);
  return std::chrono::duration_cast<std::chrono::nanoseconds>(in.time_since_epoch()).count();
}

int32_t IsCancelled(const csi_proxy_host_call*) { return 0; }

void PeerCredentials(const csi_proxy_host_call*, csi_proxy_peer_credentials* out) {
  if (out->struct_size >= CSI_PROXY_PEER_CREDENTIALS_V1_SIZE) {
    out->pid = getpid();
    out->uid = getuid();
    out->gid = getgid();
  }
}

void Shutdown() {
  if (harness == nullptr) return;
  if (harness->plugin_api != nullptr && harness->plugin_api->shutdown != nullptr) {
    harness->plugin_api->shutdown(harness->plugin_state);
  }
  std::error_code ignored;
  std::filesystem::remove_all(harness->scratch, ignored);
  std::filesystem::remove(harness->scratch + ".lock", ignored);
  std::filesystem::remove("/tmp/csi-proxy-fuzz", ignored);  // only if no other group's fuzzer is using it
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  harness = new Harness;
  // A fixed scratch directory, so the committed seeds can name paths below kubelet_path (fuzz/make_seeds.py);
  // a lock keeps a second fuzzer of the same group out of it.
  harness->scratch = std::string("/tmp/csi-proxy-fuzz/") + CSI_PROXY_FUZZ_GROUP;
  std::filesystem::create_directories("/tmp/csi-proxy-fuzz");
  int lock = open((harness->scratch + ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  if (lock < 0 || flock(lock, LOCK_EX | LOCK_NB) != 0) Fail(harness->scratch + " is in use by another fuzzer");
  std::error_code ignored;
  std::filesystem::remove_all(harness->scratch, ignored);
  for (const char* dir : {"/kubelet", "/working", "/state", "/state/smb"}) {
    std::filesystem::create_directories(harness->scratch + dir);
  }
  std::atexit(Shutdown);
  harness->config_toml = "[host]\nkubelet_path = \"" + harness->scratch + "/kubelet\"\nworking_dirs = [\"" +
                         harness->scratch + "/working\"]\nstate_dir = \"" + harness->scratch + "/state\"\n[group]\n" +
                         CSI_PROXY_FUZZ_GROUP_SETTINGS;

  void* library = dlopen(CSI_PROXY_FUZZ_GROUP_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) Fail(std::string("dlopen: ") + dlerror());
  auto negotiate = reinterpret_cast<csi_proxy_plugin_negotiate_fn>(dlsym(library, CSI_PROXY_PLUGIN_ENTRY_SYMBOL));
  if (negotiate == nullptr) Fail("no entry symbol");
  csi_proxy_host_offer offer{sizeof offer, CSI_PROXY_ABI_VERSION_MIN, CSI_PROXY_ABI_VERSION_CURRENT, "fuzz"};
  csi_proxy_plugin_answer answer{};
  answer.struct_size = sizeof answer;
  if (negotiate(&offer, &answer) != CSI_PROXY_STATUS_OK || answer.api == nullptr) Fail("negotiation failed");
  harness->plugin_api = answer.api;

  csi_proxy_host_api& api = harness->host_api;
  api.struct_size = sizeof api;
  api.abi_version = answer.abi_version;
  api.host = nullptr;
  api.config_toml = harness->config_toml.c_str();
  api.config_toml_size = harness->config_toml.size();
  api.log = Log;
  api.register_service = RegisterService;
  api.complete_call = CompleteCall;
  api.call_deadline_unix_ns = Deadline;
  api.call_is_cancelled = IsCancelled;
  api.call_peer_credentials = PeerCredentials;
  char error[512] = {0};
  harness->in_init = true;
  if (answer.api->init(&api, &harness->plugin_state, error, sizeof error) != CSI_PROXY_STATUS_OK) {
    Fail(std::string("init failed: ") + error);
  }
  harness->in_init = false;
  if (harness->methods.empty()) Fail("the library registered no method");
  std::fprintf(stderr, "group_fuzzer: %s registered %zu methods\n", answer.group, harness->methods.size());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const Method& method = harness->methods[data[0] % harness->methods.size()];
  csi_proxy_host_call call;
  call.method = method.path;
  method.handler(method.ctx, &call, data + 1, size - 1);
  std::unique_lock lock(call.mutex);
  if (!call.completed_cv.wait_for(lock, std::chrono::seconds(20), [&] { return call.completions > 0; })) {
    Fail(method.path + ": not completed within 20 s");
  }
  return 0;
}

// Fuzzes the host's side of the C ABI hand-off without sockets: register_service with service descriptions of
// any struct sizes, strides, names and method counts (host_api.cc, endpoint_registry.cc), then one call handle
// (call_handle.cc) through a sequence of completions, abandonments and queries picked by the input, the way a
// plugin, the router and the executor can interleave them. The client must be answered at most once, the
// group's completion callback must run exactly once after the plugin's first completion, and never before it.
#include <fuzzer/FuzzedDataProvider.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "abi/call_handle.h"
#include "abi/endpoint_registry.h"
#include "abi/host_context.h"

namespace {

using csi_proxy::host::CallAnswerSink;
using csi_proxy::host::CallInfo;

struct CountingSink : CallAnswerSink {
  int answers = 0;
  void Answer(csi_proxy_status_code, std::string_view message, std::string_view response) override {
    ++answers;
    volatile char sink = 0;
    for (char c : message) sink = sink ^ c;
    for (char c : response) sink = sink ^ c;
  }
};

void HandlerStub(void*, csi_proxy_host_call*, const uint8_t*, size_t) {}

size_t PickSize(FuzzedDataProvider& in, size_t v1, size_t full) {
  switch (in.ConsumeIntegralInRange(0, 4)) {
    case 0:
      return 0;
    case 1:
      return v1 - 1;
    case 2:
      return v1;
    case 3:
      return full + 16;
    default:
      return full;
  }
}

void RegisterServices(FuzzedDataProvider& in, const csi_proxy_host_api& api, csi_proxy_host_context& ctx) {
  int services = in.ConsumeIntegralInRange(0, 3);
  for (int s = 0; s < services; ++s) {
    std::string version = in.ConsumeRandomLengthString(16);
    std::string service_name = in.ConsumeRandomLengthString(24);
    size_t count = in.ConsumeIntegralInRange<size_t>(0, 6);
    size_t stride = PickSize(in, CSI_PROXY_METHOD_DESC_V1_SIZE, sizeof(csi_proxy_method_desc));
    std::vector<std::string> names;
    for (size_t i = 0; i < count; ++i) names.push_back(in.ConsumeRandomLengthString(16));
    // The array holds `count` elements of the plugin's stride (at least one whole struct each, so that a host
    // reading min(stride, its size) stays inside it).
    size_t element = std::max(stride, sizeof(csi_proxy_method_desc));
    std::vector<unsigned char> methods(std::max<size_t>(1, count) * element + 64, 0);
    for (size_t i = 0; i < count; ++i) {
      csi_proxy_method_desc m{sizeof(csi_proxy_method_desc), names[i].c_str(), in.ConsumeBool() ? HandlerStub : nullptr,
                              nullptr};
      std::memcpy(methods.data() + i * stride, &m, sizeof m);
    }
    std::vector<unsigned char> desc_bytes(sizeof(csi_proxy_service_desc) + 64, 0);
    csi_proxy_service_desc desc{
        PickSize(in, CSI_PROXY_SERVICE_DESC_V1_SIZE, sizeof(csi_proxy_service_desc)),
        in.ConsumeBool() ? version.c_str() : nullptr,
        in.ConsumeBool() ? service_name.c_str() : nullptr,
        in.ConsumeBool() ? reinterpret_cast<const csi_proxy_method_desc*>(methods.data()) : nullptr,
        count,
        stride};
    std::memcpy(desc_bytes.data(), &desc, sizeof desc);
    auto code = api.register_service(&ctx, reinterpret_cast<const csi_proxy_service_desc*>(desc_bytes.data()));
    if (code < CSI_PROXY_STATUS_OK || code > CSI_PROXY_STATUS_UNAUTHENTICATED) std::abort();
    if (code != CSI_PROXY_STATUS_OK && ctx.refusal.empty()) std::abort();  // every refusal says why
  }
}

void DriveOneCall(FuzzedDataProvider& in, const csi_proxy_host_api& api) {
  CountingSink sink;
  CallInfo info{"fuzz", "/v1.Fuzz/Call", {}, std::chrono::system_clock::now() + std::chrono::seconds(5)};
  auto call = std::make_shared<csi_proxy_host_call>(info, grpc::Slice(in.ConsumeRandomLengthString(64)), &sink);
  int on_completed = 0;
  call->HandOverToPlugin(call, [&] { ++on_completed; });
  bool plugin_completed = false;
  bool detached = false;
  int steps = in.ConsumeIntegralInRange(1, 8);
  for (int i = 0; i < steps; ++i) {
    switch (in.ConsumeIntegralInRange(0, 4)) {
      case 0: {
        if (plugin_completed) break;  // the handle may be gone for the plugin after its completion
        auto code = in.ConsumeIntegral<int32_t>();
        std::string message = in.ConsumeRandomLengthString(32);
        std::string response = in.ConsumeRandomLengthString(32);
        api.complete_call(call.get(), code, message.data(), message.size(),
                          reinterpret_cast<const uint8_t*>(response.data()), response.size());
        plugin_completed = true;
        break;
      }
      case 1:
        call->Abandon(in.ConsumeIntegralInRange<int32_t>(1, 16), in.ConsumeRandomLengthString(16));
        break;
      case 2:
        if (sink.answers > 0 && !detached) {
          call->DetachSink();
          detached = true;
        }
        break;
      case 3:
        if (!plugin_completed) (void)api.call_is_cancelled(call.get());
        break;
      default:
        if (!plugin_completed) {
          (void)api.call_deadline_unix_ns(call.get());
          csi_proxy_peer_credentials peer{sizeof peer, -1, -1, -1};
          api.call_peer_credentials(call.get(), &peer);
        }
        break;
    }
    if (sink.answers > 1) std::abort();                            // the client is answered at most once
    if (on_completed != (plugin_completed ? 1 : 0)) std::abort();  // the group's count follows the plugin
  }
  if (!plugin_completed) {  // the plugin always completes in the end
    api.complete_call(call.get(), CSI_PROXY_STATUS_OK, nullptr, 0, nullptr, 0);
  }
  if (on_completed != 1 || sink.answers > 1) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);  // refusals and double completions are logged; the log is not the test
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  csi_proxy::host::EndpointRegistry registry;
  csi_proxy_host_context ctx;
  ctx.group = "fuzz";
  ctx.library = "libcsi-proxy-fuzz.so";
  ctx.registry = &registry;
  ctx.registering = true;
  std::string config = "[host]\n[group]\n";
  csi_proxy_host_api api = csi_proxy::host::MakeHostApi(&ctx, config, /*check_only=*/false);
  RegisterServices(in, api, ctx);
  DriveOneCall(in, api);
  return 0;
}

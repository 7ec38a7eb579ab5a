// The functions of csi_proxy_host_api: what a plugin may ask of the host.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "abi/abi_struct.h"
#include "abi/host_context.h"

namespace csi_proxy::host {
namespace {

void Log(csi_proxy_host_context* ctx, csi_proxy_log_level level, const char* message, size_t size) noexcept {
  if (ctx == nullptr || message == nullptr) return;
  auto spd_level = spdlog::level::info;
  switch (level) {
    case CSI_PROXY_LOG_TRACE:
      spd_level = spdlog::level::trace;
      break;
    case CSI_PROXY_LOG_DEBUG:
      spd_level = spdlog::level::debug;
      break;
    case CSI_PROXY_LOG_INFO:
      spd_level = spdlog::level::info;
      break;
    case CSI_PROXY_LOG_WARN:
      spd_level = spdlog::level::warn;
      break;
    default:
      spd_level = spdlog::level::err;
      break;
  }
  if (!spdlog::should_log(spd_level)) return;
  try {
    spdlog::log(spd_level, "[{}] {}", ctx->group, std::string_view(message, size));
  } catch (...) {
  }
}

csi_proxy_status_code RegisterService(csi_proxy_host_context* ctx, const csi_proxy_service_desc* desc) noexcept {
  try {
    if (ctx == nullptr || !ctx->registering) {
      if (ctx) ctx->refusal = "register_service was called outside init";
      return CSI_PROXY_STATUS_FAILED_PRECONDITION;
    }
    if (ctx->offered_versions.size() >= CSI_PROXY_MAX_SERVICES_PER_LIBRARY) {
      ctx->refusal = "the library registers more than " + std::to_string(CSI_PROXY_MAX_SERVICES_PER_LIBRARY) +
                     " services; a library may register at most that many (CSI_PROXY_MAX_SERVICES_PER_LIBRARY)";
      return CSI_PROXY_STATUS_RESOURCE_EXHAUSTED;
    }
    auto reg = ReadServiceDesc(desc);
    if (!reg.ok()) {
      ctx->refusal = reg.status().message();
      return static_cast<csi_proxy_status_code>(reg.status().code());
    }
    ctx->offered_versions.push_back(reg->version);
    if (!ctx->versions.empty() &&
        std::find(ctx->versions.begin(), ctx->versions.end(), reg->version) == ctx->versions.end()) {
      ctx->skipped_versions.push_back(reg->version);
      return CSI_PROXY_STATUS_OK;  // the admin chose not to serve this version; not the plugin's fault
    }
    std::vector<ServiceRegistration> candidate = ctx->pending;
    candidate.push_back(*reg);
    Status conflict = ctx->registry->CheckConflicts(ctx->group, ctx->library, candidate);
    if (!conflict.ok()) {
      ctx->refusal = conflict.message();
      return static_cast<csi_proxy_status_code>(conflict.code());
    }
    ctx->pending = std::move(candidate);
    return CSI_PROXY_STATUS_OK;
  } catch (const std::exception& e) {
    ctx->refusal = e.what();
    return CSI_PROXY_STATUS_INTERNAL;
  }
}

void CompleteCall(csi_proxy_host_call* call, csi_proxy_status_code code, const char* message, size_t message_size,
                  const uint8_t* response, size_t response_size) noexcept {
  if (call == nullptr) return;
  std::string_view msg = message != nullptr ? std::string_view(message, message_size) : std::string_view();
  std::string_view resp = response != nullptr ? std::string_view(reinterpret_cast<const char*>(response), response_size)
                                              : std::string_view();
  call->Complete(code, msg, resp);
}

int64_t CallDeadline(const csi_proxy_host_call* call) noexcept {
  return call != nullptr ? call->DeadlineUnixNs() : INT64_MAX;
}

int32_t CallIsCancelled(const csi_proxy_host_call* call) noexcept {
  return call != nullptr && call->IsCancelled() ? 1 : 0;
}

void CallPeer(const csi_proxy_host_call* call, csi_proxy_peer_credentials* out) noexcept {
  PeerCredentials peer = call != nullptr ? call->info().peer : PeerCredentials{};
  WriteAbiStruct(csi_proxy_peer_credentials{sizeof(csi_proxy_peer_credentials), peer.pid, peer.uid, peer.gid}, out);
}

}  // namespace

csi_proxy_host_api MakeHostApi(csi_proxy_host_context* context, const std::string& config_toml, bool check_only) {
  csi_proxy_host_api api{};
  api.struct_size = sizeof api;
  api.abi_version = CSI_PROXY_ABI_VERSION_CURRENT;
  api.host = context;
  api.config_toml = config_toml.c_str();
  api.config_toml_size = config_toml.size();
  api.log = &Log;
  api.register_service = &RegisterService;
  api.complete_call = &CompleteCall;
  api.call_deadline_unix_ns = &CallDeadline;
  api.call_is_cancelled = &CallIsCancelled;
  api.call_peer_credentials = &CallPeer;
  api.init_flags = check_only ? CSI_PROXY_INIT_CHECK_ONLY : 0u;
  return api;
}

}  // namespace csi_proxy::host

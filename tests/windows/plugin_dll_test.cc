// A group library built for Windows (the SDK's echo example, csi-proxy-echo.dll) as the host will use it:
// loaded by absolute path, exactly one export, negotiation, init with a host table, calls through the C ABI
// (including a handler that throws, which the SDK must turn into INTERNAL inside the DLL) and shutdown.
#include <windows.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "csi_proxy/plugin_abi.h"

// The host side of a call, as this test's small host defines it.
struct csi_proxy_host_call {
  bool completed = false;
  int completions = 0;
  csi_proxy_status_code code = -1;
  std::string message;
  std::string response;
};

namespace {

std::wstring EchoDllPath() {
  std::string path = CSI_PROXY_BUILD_DIR "/lib/csi-proxy/plugins/csi-proxy-echo.dll";
  for (auto& c : path) {
    if (c == '/') c = '\\';
  }
  return std::wstring(path.begin(), path.end());
}

// The names in a loaded module's export directory.
std::vector<std::string> ExportedNames(HMODULE module) {
  auto* base = reinterpret_cast<const unsigned char*>(module);
  auto* dos = reinterpret_cast<const IMAGE_DOS_HEADER*>(base);
  auto* nt = reinterpret_cast<const IMAGE_NT_HEADERS*>(base + dos->e_lfanew);
  const auto& dir = nt->OptionalHeader.DataDirectory[IMAGE_DIRECTORY_ENTRY_EXPORT];
  std::vector<std::string> names;
  if (dir.Size == 0) return names;
  auto* exports = reinterpret_cast<const IMAGE_EXPORT_DIRECTORY*>(base + dir.VirtualAddress);
  auto* name_rvas = reinterpret_cast<const DWORD*>(base + exports->AddressOfNames);
  for (DWORD i = 0; i < exports->NumberOfNames; ++i) {
    names.emplace_back(reinterpret_cast<const char*>(base + name_rvas[i]));
  }
  if (exports->NumberOfFunctions != exports->NumberOfNames) names.emplace_back("<unnamed export>");
  return names;
}

struct Registered {
  std::string version, service;
  std::vector<std::string> methods;
  std::vector<csi_proxy_method_desc> descs;
};

// The host's side of the C ABI, small: records what the library registers and logs.
struct TestHost {
  std::vector<Registered> services;
  std::vector<std::string> log_lines;
  std::string config =
      "[host]\nkubelet_path = 'C:\\var\\lib\\kubelet'\nworking_dirs = []\nstate_dir = 'C:\\csi-proxy'\n"
      "[group]\ngreeting = 'hello from a test'\n";
  csi_proxy_host_api api{};

  TestHost() {
    api.struct_size = sizeof api;
    api.abi_version = CSI_PROXY_ABI_VERSION_CURRENT;
    api.host = reinterpret_cast<csi_proxy_host_context*>(this);
    api.config_toml = config.c_str();
    api.config_toml_size = config.size();
    api.log = [](csi_proxy_host_context* h, csi_proxy_log_level, const char* msg, size_t size) {
      reinterpret_cast<TestHost*>(h)->log_lines.emplace_back(msg, size);
    };
    api.register_service = [](csi_proxy_host_context* h, const csi_proxy_service_desc* s) -> csi_proxy_status_code {
      Registered r{s->version, s->service_name, {}, {}};
      for (size_t i = 0; i < s->method_count; ++i) {
        csi_proxy_method_desc d{};
        std::memcpy(&d, reinterpret_cast<const unsigned char*>(s->methods) + i * s->method_desc_size,
                    std::min(sizeof d, s->method_desc_size));
        r.methods.emplace_back(d.name);
        r.descs.push_back(d);
      }
      reinterpret_cast<TestHost*>(h)->services.push_back(std::move(r));
      return CSI_PROXY_STATUS_OK;
    };
    api.complete_call = [](csi_proxy_host_call* call, csi_proxy_status_code code, const char* message,
                           size_t message_size, const uint8_t* response, size_t response_size) {
      call->completions++;
      call->completed = true;
      call->code = code;
      call->message.assign(message ? message : "", message ? message_size : 0);
      call->response.assign(reinterpret_cast<const char*>(response), response ? response_size : 0);
    };
    api.call_deadline_unix_ns = [](const csi_proxy_host_call*) -> int64_t { return INT64_MAX; };
    api.call_is_cancelled = [](const csi_proxy_host_call*) -> int32_t { return 0; };
    api.call_peer_credentials = [](const csi_proxy_host_call*, csi_proxy_peer_credentials* out) {
      out->pid = static_cast<int64_t>(GetCurrentProcessId());
    };
  }

  const csi_proxy_method_desc* Method(const std::string& service, const std::string& name) const {
    for (const auto& s : services) {
      for (size_t i = 0; i < s.methods.size(); ++i) {
        if (s.service == service && s.methods[i] == name) return &s.descs[i];
      }
    }
    return nullptr;
  }
};

class EchoDll : public ::testing::Test {
 protected:
  void SetUp() override {
    module_ = LoadLibraryExW(EchoDllPath().c_str(), nullptr, LOAD_WITH_ALTERED_SEARCH_PATH);
    ASSERT_NE(module_, nullptr) << "LoadLibraryExW failed with error " << GetLastError();
  }
  void TearDown() override {
    if (module_) FreeLibrary(module_);
  }
  csi_proxy_plugin_negotiate_fn Negotiate() {
    return reinterpret_cast<csi_proxy_plugin_negotiate_fn>(
        reinterpret_cast<void*>(GetProcAddress(module_, CSI_PROXY_PLUGIN_ENTRY_SYMBOL)));
  }
  HMODULE module_ = nullptr;
};

TEST_F(EchoDll, ExportsOnlyTheNegotiationEntryPoint) {
  EXPECT_EQ(ExportedNames(module_), std::vector<std::string>{CSI_PROXY_PLUGIN_ENTRY_SYMBOL});
}

TEST_F(EchoDll, NegotiatesTheNewestVersionBothSidesSpeak) {
  auto negotiate = Negotiate();
  ASSERT_NE(negotiate, nullptr);
  csi_proxy_host_offer offer{sizeof offer, CSI_PROXY_ABI_VERSION_MIN, CSI_PROXY_ABI_VERSION_CURRENT, "0.0.0-test"};
  csi_proxy_plugin_answer answer{};
  answer.struct_size = sizeof answer;
  ASSERT_EQ(negotiate(&offer, &answer), CSI_PROXY_STATUS_OK);
  EXPECT_EQ(answer.abi_version, CSI_PROXY_ABI_VERSION_CURRENT);
  EXPECT_STREQ(answer.group, "echo");
  ASSERT_NE(answer.api, nullptr);
  EXPECT_NE(answer.api->init, nullptr);
}

TEST_F(EchoDll, ServesCallsThroughTheCAbiAndTurnsAThrowIntoInternal) {
  auto negotiate = Negotiate();
  ASSERT_NE(negotiate, nullptr);
  csi_proxy_host_offer offer{sizeof offer, CSI_PROXY_ABI_VERSION_MIN, CSI_PROXY_ABI_VERSION_CURRENT, "0.0.0-test"};
  csi_proxy_plugin_answer answer{};
  answer.struct_size = sizeof answer;
  ASSERT_EQ(negotiate(&offer, &answer), CSI_PROXY_STATUS_OK);

  TestHost host;
  void* state = nullptr;
  char error[256] = {};
  ASSERT_EQ(answer.api->init(&host.api, &state, error, sizeof error), CSI_PROXY_STATUS_OK) << error;
  ASSERT_EQ(host.services.size(), 2u);
  EXPECT_EQ(host.services[0].service, "v1.Echo");
  EXPECT_EQ(host.services[0].version, "v1");
  EXPECT_EQ(host.services[1].service, "v1alpha1.Echo");

  const auto* echo = host.Method("v1.Echo", "Echo");
  ASSERT_NE(echo, nullptr);
  // EchoRequest{text: "pipe"}: field 1, length-delimited.
  const std::string request = std::string("\x0a\x04", 2) + "pipe";
  csi_proxy_host_call call;
  echo->handler(echo->plugin_method_ctx, &call, reinterpret_cast<const uint8_t*>(request.data()), request.size());
  EXPECT_EQ(call.completions, 1);
  EXPECT_EQ(call.code, CSI_PROXY_STATUS_OK) << call.message;
  EXPECT_EQ(call.response, request) << "EchoResponse{text} has the same field number and bytes";

  // EchoRequest{throw_exception: true}: field 4, varint 1.
  const std::string throwing("\x20\x01", 2);
  csi_proxy_host_call thrown;
  echo->handler(echo->plugin_method_ctx, &thrown, reinterpret_cast<const uint8_t*>(throwing.data()), throwing.size());
  EXPECT_EQ(thrown.completions, 1);
  EXPECT_EQ(thrown.code, CSI_PROXY_STATUS_INTERNAL);
  EXPECT_NE(thrown.message.find("asked to throw"), std::string::npos) << thrown.message;

  answer.api->shutdown(state);
  bool logged_ready = false;
  for (const auto& line : host.log_lines) logged_ready |= line.find("hello from a test") != std::string::npos;
  EXPECT_TRUE(logged_ready) << "the library logs its greeting through the host's log function";
}

}  // namespace

// One way for a group's Windows tests to call a method, so that one table of cases runs twice: through the
// group's DLL in the SDK's fake host (the C ABI, in process) and through csi-proxy.exe over its named pipes (the
// host, the relay and gRPC, as a driver's client over go-winio reaches it). Both answer with the fake host's
// CallResult: the status code, its message and the response bytes.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "csi_proxy/testing/fake_host.hpp"
#include "grpc_client.h"
#include "pipe_dialer_windows.h"

namespace csi_proxy::testing {

using sdk::testing::CallResult;

class GroupCaller {
 public:
  virtual ~GroupCaller() = default;
  // Calls `method` ("/v1.Filesystem/Mkdir") with the serialized request.
  virtual CallResult CallRaw(const std::string& method, const std::string& request) = 0;

  // The same with messages; the response is parsed into `response` (if given) when the call succeeds.
  CallResult Call(const std::string& method, const google::protobuf::MessageLite& request,
                  google::protobuf::MessageLite* response) {
    CallResult result = CallRaw(method, request.SerializeAsString());
    if (result.ok() && response != nullptr && !response->ParseFromString(result.response)) {
      result.code = Code::kInternal;
      result.message = "the response does not parse as " + response->GetTypeName();
    }
    return result;
  }
};

// The group's DLL, loaded and initialised by the caller, in the SDK's fake host.
class FakeHostCaller : public GroupCaller {
 public:
  explicit FakeHostCaller(sdk::testing::FakeHost& host) : host_(host) {}
  CallResult CallRaw(const std::string& method, const std::string& request) override {
    return host_.Call(method, request);
  }

 private:
  sdk::testing::FakeHost& host_;
};

// A running csi-proxy.exe: each method is called on the pipe of its group and version
// (/v1beta2.Filesystem/Mkdir on \\.\pipe\csi-proxy-filesystem-v1beta2), one connection per pipe kept for the
// caller's life, as a driver keeps one per group and version.
class PipeCaller : public GroupCaller {
 public:
  CallResult CallRaw(const std::string& method, const std::string& request) override {
    return CallOn(PipeOf(method), method, request);
  }

  // On a pipe of the caller's choosing (another version's method on a pipe, for instance).
  CallResult CallOn(const std::string& pipe, const std::string& method, const std::string& request) {
    CallResult result;
    result.completed = true;
    auto& channel = channels_[pipe];
    if (channel == nullptr) {
      auto dialed = host::DialPipe(pipe, std::chrono::seconds(10));
      if (!dialed.ok()) {
        result.code = Code::kUnavailable;
        result.message = dialed.status().message();
        return result;
      }
      channel = *dialed;
    }
    grpc::Status status = testing::CallRaw(channel, method, request, &result.response, std::chrono::seconds(60));
    result.code = static_cast<Code>(status.error_code());
    result.message = status.error_message();
    return result;
  }

  // "csi-proxy-<group>-<version>" of "/<version>.<Service>/<Method>": the group is the service's name in lower case.
  static std::string PipeOf(const std::string& method) {
    size_t dot = method.find('.');
    size_t slash = method.find('/', 1);
    std::string group = method.substr(dot + 1, slash - dot - 1);
    for (char& c : group) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return "csi-proxy-" + group + "-" + method.substr(1, dot - 1);
  }

 private:
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_;
};

}  // namespace csi_proxy::testing

// The benchmarks' client: calls a method path with request bytes over a Unix socket, the same way for the
// csi-proxy host and for the baseline servers, so that client-side cost is identical on both sides.
//
// Each RawClient owns its own connection (a private subchannel pool, so two clients never share one) and its
// own completion queue, and is used by one thread at a time.
#pragma once

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>

namespace csi_proxy::testing {

class RawClient {
 public:
  explicit RawClient(const std::string& socket_path);
  ~RawClient();
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  // One unary call. `response` may be null.
  grpc::Status Call(const std::string& method, const std::string& request, std::string* response,
                    std::chrono::milliseconds timeout = std::chrono::seconds(30));

 private:
  std::shared_ptr<grpc::Channel> channel_;
  grpc::GenericStub stub_;
  grpc::CompletionQueue cq_;
};

// A method path that no server implements: a server that is up answers UNIMPLEMENTED.
inline constexpr const char* kProbeMethod = "/csi_proxy.bench.Probe/Ping";

// True when the server behind `socket_path` answers a call (any answer but UNAVAILABLE / DEADLINE_EXCEEDED).
bool ServerAnswers(const std::string& socket_path, std::chrono::milliseconds timeout = std::chrono::seconds(2));

}  // namespace csi_proxy::testing

// See raw_client.h.
#include "raw_client.h"

#include <grpc/grpc.h>

#include "grpc_client.h"

namespace csi_proxy::testing {

RawClient::RawClient(const std::string& socket_path)
    : channel_([&] {
        grpc::ChannelArguments args;
        args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
        args.SetMaxReceiveMessageSize(16 * 1024 * 1024);
        return grpc::CreateCustomChannel("unix:" + socket_path, grpc::InsecureChannelCredentials(), args);
      }()),
      stub_(channel_) {}

RawClient::~RawClient() {
  cq_.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (cq_.Next(&tag, &ok)) {
  }
}

grpc::Status RawClient::Call(const std::string& method, const std::string& request, std::string* response,
                             std::chrono::milliseconds timeout) {
  return UnaryCallOn(stub_, cq_, method, request, response, timeout);
}

bool ServerAnswers(const std::string& socket_path, std::chrono::milliseconds timeout) {
  RawClient client(socket_path);
  grpc::Status s = client.Call(kProbeMethod, "", nullptr, timeout);
  return s.error_code() != grpc::StatusCode::UNAVAILABLE && s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED;
}

}  // namespace csi_proxy::testing

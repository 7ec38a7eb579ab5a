// See raw_client.h.
#include "raw_client.h"

#include <grpc/grpc.h>

#include <vector>

namespace csi_proxy::bench {

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
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  grpc::Slice slice(request);
  grpc::ByteBuffer request_buffer(&slice, 1);
  grpc::ByteBuffer response_buffer;
  grpc::Status status;
  auto call = stub_.PrepareUnaryCall(&ctx, method, request_buffer, &cq_);
  call->StartCall();
  call->Finish(&response_buffer, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  cq_.Next(&tag, &ok);
  if (status.ok() && response != nullptr) {
    std::vector<grpc::Slice> slices;
    response->clear();
    if (response_buffer.Dump(&slices).ok()) {
      for (const auto& s : slices) response->append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  return status;
}

bool ServerAnswers(const std::string& socket_path, std::chrono::milliseconds timeout) {
  RawClient client(socket_path);
  grpc::Status s = client.Call(kProbeMethod, "", nullptr, timeout);
  return s.error_code() != grpc::StatusCode::UNAVAILABLE && s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED;
}

}  // namespace csi_proxy::bench

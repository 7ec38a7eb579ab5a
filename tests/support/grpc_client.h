// A gRPC client for tests: calls any method path with protobuf-lite messages over a Unix socket, without
// generated stubs (the same bytes a Go or C++ client with generated code sends).
#pragma once

#include <google/protobuf/message_lite.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace csi_proxy::testing {

inline std::shared_ptr<grpc::Channel> Dial(const std::string& socket_path) {
  return grpc::CreateChannel("unix://" + socket_path, grpc::InsecureChannelCredentials());
}

// One unary call through `stub`, waited for on `cq` (which the caller keeps using or shuts down): the request
// bytes out, the response bytes into `response_bytes` (may be null) on success. The benchmarks' RawClient makes
// its calls with it too.
inline grpc::Status UnaryCallOn(grpc::GenericStub& stub, grpc::CompletionQueue& cq, const std::string& method,
                                const std::string& request_bytes, std::string* response_bytes,
                                std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  grpc::Slice slice(request_bytes);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  auto call = stub.PrepareUnaryCall(&ctx, method, request, &cq);
  call->StartCall();
  grpc::Status status;
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  cq.Next(&tag, &ok);
  if (status.ok() && response_bytes != nullptr) {
    std::vector<grpc::Slice> slices;
    response_bytes->clear();
    if (response.Dump(&slices).ok()) {
      for (const auto& s : slices) response_bytes->append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  return status;
}

// Sends raw request bytes; fills `response_bytes` on success.
inline grpc::Status CallRaw(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                            const std::string& request_bytes, std::string* response_bytes,
                            std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  grpc::Status status = UnaryCallOn(stub, cq, method, request_bytes, response_bytes, timeout);
  cq.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (cq.Next(&tag, &ok)) {
  }
  return status;
}

// Calls `method` (e.g. "/v1.Filesystem/PathExists") with a typed request and parses the typed response.
inline grpc::Status Call(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                         const google::protobuf::MessageLite& request, google::protobuf::MessageLite* response,
                         std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  std::string bytes;
  grpc::Status status = CallRaw(channel, method, request.SerializeAsString(), &bytes, timeout);
  if (status.ok() && response != nullptr && !response->ParseFromString(bytes)) {
    return grpc::Status(grpc::StatusCode::DATA_LOSS, "the response does not parse as " + response->GetTypeName());
  }
  return status;
}

}  // namespace csi_proxy::testing

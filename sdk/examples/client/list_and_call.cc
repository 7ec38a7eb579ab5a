// csi-proxy-example-client: the quickstart client. Lists the csi-proxy endpoints in a directory, then calls
// /v1.Filesystem/PathExists on csi-proxy-filesystem-v1, the way a CSI node plugin calls the proxy.
//
//   csi-proxy-example-client [ENDPOINT_DIR [PATH]]     (defaults: /run/csi-proxy and /var/lib/kubelet)
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "v1/filesystem.pb.h"

namespace {

// One unary call by method path: the bytes a client with generated stubs would send.
grpc::Status Call(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                  const google::protobuf::MessageLite& request, google::protobuf::MessageLite* response) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Slice slice(request.SerializeAsString());
  grpc::ByteBuffer send(&slice, 1);
  grpc::ByteBuffer receive;
  grpc::CompletionQueue cq;
  auto call = stub.PrepareUnaryCall(&ctx, method, send, &cq);
  call->StartCall();
  grpc::Status status;
  call->Finish(&receive, &status, nullptr);
  void* tag = nullptr;
  bool ok = false;
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  if (status.ok()) {
    std::vector<grpc::Slice> slices;
    std::string bytes;
    if (receive.Dump(&slices).ok()) {
      for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
    if (!response->ParseFromString(bytes)) return {grpc::StatusCode::DATA_LOSS, "unparsable response"};
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string endpoint_dir = argc > 1 ? argv[1] : "/run/csi-proxy";
  const std::string path = argc > 2 ? argv[2] : "/var/lib/kubelet";

  std::vector<std::string> endpoints;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(endpoint_dir, ec)) {
    std::string name = entry.path().filename().string();
    if (name.rfind("csi-proxy-", 0) == 0 && entry.is_socket()) endpoints.push_back(name);
  }
  if (ec) {
    std::fprintf(stderr, "cannot list %s: %s\n", endpoint_dir.c_str(), ec.message().c_str());
    return 1;
  }
  std::sort(endpoints.begin(), endpoints.end());
  std::printf("endpoints in %s:\n", endpoint_dir.c_str());
  for (const auto& e : endpoints) std::printf("  %s\n", e.c_str());

  auto channel =
      grpc::CreateChannel("unix://" + endpoint_dir + "/csi-proxy-filesystem-v1", grpc::InsecureChannelCredentials());
  v1::PathExistsRequest request;
  request.set_path(path);
  v1::PathExistsResponse response;
  grpc::Status status = Call(channel, "/v1.Filesystem/PathExists", request, &response);
  if (!status.ok()) {
    std::fprintf(stderr, "PathExists(%s) failed: %s (code %d)\n", path.c_str(), status.error_message().c_str(),
                 static_cast<int>(status.error_code()));
    return 1;
  }
  std::printf("PathExists(%s) = %s\n", path.c_str(), response.exists() ? "true" : "false");
  return 0;
}

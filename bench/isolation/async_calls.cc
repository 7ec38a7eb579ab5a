// See async_calls.h.
#include "async_calls.h"

#include <grpc/grpc.h>

namespace csi_proxy::bench {

AsyncCalls::AsyncCalls(const std::string& socket_path)
    : channel_([&] {
        grpc::ChannelArguments args;
        args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
        return grpc::CreateCustomChannel("unix:" + socket_path, grpc::InsecureChannelCredentials(), args);
      }()),
      stub_(channel_),
      drain_(&AsyncCalls::Drain, this) {}

AsyncCalls::~AsyncCalls() {
  WaitAll(std::chrono::minutes(2));
  cq_.Shutdown();
  drain_.join();
}

void AsyncCalls::Start(const std::string& method, const std::string& request, std::chrono::milliseconds timeout) {
  auto call = std::make_unique<Call>();
  call->ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  grpc::Slice slice(request);
  grpc::ByteBuffer request_buffer(&slice, 1);
  Call* raw = call.get();
  {
    std::lock_guard lock(mu_);
    calls_.push_back(std::move(call));
    ++started_;
  }
  raw->reader = stub_.PrepareUnaryCall(&raw->ctx, method, request_buffer, &cq_);
  raw->reader->StartCall();
  raw->reader->Finish(&raw->response, &raw->status, raw);
}

void AsyncCalls::Drain() {
  void* tag = nullptr;
  bool ok = false;
  while (cq_.Next(&tag, &ok)) {
    auto* done = static_cast<Call*>(tag);
    std::lock_guard lock(mu_);
    grpc::StatusCode code = done->status.error_code();
    if (answers_[code]++ == 0) first_messages_[code] = done->status.error_message();
    ++answered_count_;  // the call itself is freed with this object: Start may still be returning from Finish
    answered_.notify_all();
  }
}

bool AsyncCalls::WaitAll(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return answered_.wait_for(lock, timeout, [&] { return answered_count_ == started_; });
}

int AsyncCalls::started() const {
  std::lock_guard lock(mu_);
  return started_;
}

std::map<grpc::StatusCode, int> AsyncCalls::answers() const {
  std::lock_guard lock(mu_);
  return answers_;
}

std::map<grpc::StatusCode, std::string> AsyncCalls::first_messages() const {
  std::lock_guard lock(mu_);
  return first_messages_;
}

}  // namespace csi_proxy::bench

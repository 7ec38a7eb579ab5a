// Many unary calls in flight at once on one connection, without a thread per call: what fills a group's whole
// budget (its workers and its queue) in one go. Answers are counted by status code as they arrive.
#pragma once

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace csi_proxy::bench {

class AsyncCalls {
 public:
  explicit AsyncCalls(const std::string& socket_path);
  ~AsyncCalls();  // waits for the answers (every call has a deadline), then ends its thread
  AsyncCalls(const AsyncCalls&) = delete;
  AsyncCalls& operator=(const AsyncCalls&) = delete;

  // Starts one call; returns at once.
  void Start(const std::string& method, const std::string& request, std::chrono::milliseconds timeout);
  // Waits until every started call has been answered, or `timeout`; true when all were.
  bool WaitAll(std::chrono::milliseconds timeout);

  int started() const;
  // Answers so far, by status code, and the first message seen for each code.
  std::map<grpc::StatusCode, int> answers() const;
  std::map<grpc::StatusCode, std::string> first_messages() const;

 private:
  struct Call {
    grpc::ClientContext ctx;
    grpc::ByteBuffer response;
    grpc::Status status;
    std::unique_ptr<grpc::GenericClientAsyncResponseReader> reader;
  };
  void Drain();

  std::shared_ptr<grpc::Channel> channel_;
  grpc::GenericStub stub_;
  grpc::CompletionQueue cq_;
  mutable std::mutex mu_;
  std::condition_variable answered_;
  std::list<std::unique_ptr<Call>> calls_;
  int started_ = 0;
  int answered_count_ = 0;
  std::map<grpc::StatusCode, int> answers_;
  std::map<grpc::StatusCode, std::string> first_messages_;
  std::thread drain_;
};

}  // namespace csi_proxy::bench

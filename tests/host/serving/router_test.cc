// The byte-level router of one endpoint (serving/router.h) in front of a fake dispatcher, over gRPC's in-process
// channel: the order in which it refuses a call before the library (unknown method, then who calls, then size),
// that a call is answered once whoever answers first, and that a call follows the binding of the moment.
#include "serving/router.h"

#include <gmock/gmock.h>
#include <grpcpp/server_builder.h>
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <thread>

#include "grpc_client.h"
#include "serving/stream_gate.h"

namespace csi_proxy::host {
namespace {

using namespace std::chrono_literals;
using csi_proxy::testing::CallRaw;
using ::testing::AnyOf;

void NoHandler(void*, csi_proxy_host_call*, const uint8_t*, size_t) {}

// Stands in for a group instance: does what the test says with each call and counts them.
class FakeDispatcher final : public CallDispatcher {
 public:
  explicit FakeDispatcher(std::function<Status(CallHandle)> on_call) : on_call_(std::move(on_call)) {}
  Status Dispatch(const MethodHandler&, CallHandle call) override {
    ++dispatched;
    return on_call_(std::move(call));
  }
  std::atomic<int> dispatched{0};

 private:
  std::function<Status(CallHandle)> on_call_;
};

// Answers every call with "answer:<request>".
std::shared_ptr<FakeDispatcher> Answering() {
  return std::make_shared<FakeDispatcher>([](CallHandle call) {
    call->Complete(CSI_PROXY_STATUS_OK, {}, "answer:" + std::string(call->request()));
    return Status::Ok();
  });
}

class RecordingObserver final : public CallObserver {
 public:
  void OnStarted(const Endpoint&, std::string_view, const MethodHandler*) override { ++started; }
  void OnFinished(const CallEvent& event) override {
    std::lock_guard lock(mu);
    codes.push_back(event.code);
  }
  std::vector<csi_proxy_status_code> finished() {
    std::lock_guard lock(mu);
    return codes;
  }
  std::atomic<int> started{0};
  std::mutex mu;
  std::vector<csi_proxy_status_code> codes;
};

Endpoint EchoEndpoint(const std::vector<std::string>& methods) {
  Endpoint e;
  e.name = "csi-proxy-echo-v1";
  e.group = "echo";
  e.version = "v1";
  for (const auto& m : methods) e.methods["/v1.Echo/" + m] = MethodHandler{&NoHandler, nullptr, 0};
  e.services = {"v1.Echo"};
  return e;
}

class RouterTest : public ::testing::Test {
 protected:
  std::shared_ptr<const EndpointBinding> Binding(const Endpoint& endpoint, std::shared_ptr<CallDispatcher> dispatcher,
                                                 std::shared_ptr<const Authorization> authorization = nullptr) {
    return std::make_shared<EndpointBinding>(
        EndpointBinding{&endpoint, std::move(dispatcher), 1024, {observer_}, std::move(authorization)});
  }

  // Serves the router's registered methods and, unless `registered_only`, its generic service.
  void Serve(std::shared_ptr<const EndpointBinding> binding, bool registered_only = false) {
    router_ = std::make_unique<Router>(std::move(binding), &gate_);
    grpc::ServerBuilder builder;
    builder.RegisterService(router_->methods());
    if (!registered_only) builder.RegisterCallbackGenericService(router_->generic());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    channel_ = server_->InProcessChannel(grpc::ChannelArguments());
  }

  grpc::Status Call(const std::string& method, const std::string& request, std::string* response = nullptr,
                    std::chrono::milliseconds timeout = 10s) {
    return CallRaw(channel_, method, request, response, timeout);
  }

  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + 1s);
  }

  std::shared_ptr<RecordingObserver> observer_ = std::make_shared<RecordingObserver>();
  // The in-process channel has no fd: every call has unknown credentials (uid -1).
  StreamGate gate_{std::make_shared<StreamAccounts>(StreamLimits{})};
  std::unique_ptr<Router> router_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(RouterTest, AnAdmittedCallGetsItsHandlersAnswer) {
  Endpoint endpoint = EchoEndpoint({"Echo"});
  auto dispatcher = Answering();
  Serve(Binding(endpoint, dispatcher));
  std::string response;
  grpc::Status status = Call("/v1.Echo/Echo", "hello", &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response, "answer:hello");
  EXPECT_EQ(dispatcher->dispatched, 1);
  EXPECT_EQ(observer_->started, 1);
  EXPECT_EQ(observer_->finished(), std::vector<csi_proxy_status_code>{CSI_PROXY_STATUS_OK});
}

// The registered methods use gRPC's internal API (router.cc pins the gRPC version): without the generic service
// behind them, the methods of the binding the server was built with are still served, with their answers and
// refusals, and gRPC itself knows no other path.
TEST_F(RouterTest, TheRegisteredMethodsServeOnTheirOwn) {
  Endpoint endpoint = EchoEndpoint({"Echo", "Fail"});
  auto dispatcher = std::make_shared<FakeDispatcher>([](CallHandle call) {
    if (call->info().method == "/v1.Echo/Fail") {
      call->Complete(CSI_PROXY_STATUS_FAILED_PRECONDITION, "it failed", {});
    } else {
      call->Complete(CSI_PROXY_STATUS_OK, {}, "answer:" + std::string(call->request()));
    }
    return Status::Ok();
  });
  Serve(Binding(endpoint, dispatcher), /*registered_only=*/true);
  std::string response;
  grpc::Status ok = Call("/v1.Echo/Echo", std::string(1000, 'r'), &response);
  ASSERT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(response, "answer:" + std::string(1000, 'r'));
  grpc::Status failed = Call("/v1.Echo/Fail", "x");
  EXPECT_EQ(failed.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(failed.error_message(), "it failed");
  EXPECT_EQ(Call("/v1.Echo/Other", "x").error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(dispatcher->dispatched, 2);
  EXPECT_EQ(observer_->finished(),
            (std::vector<csi_proxy_status_code>{CSI_PROXY_STATUS_OK, CSI_PROXY_STATUS_FAILED_PRECONDITION}));
}

TEST_F(RouterTest, RefusesAnUnknownMethodBeforeTheCallerAndTheCallerBeforeTheSize) {
  Endpoint endpoint = EchoEndpoint({"Echo"});
  auto dispatcher = Answering();
  AccessLists nobody;
  nobody.allowed_uids = std::vector<uint32_t>{12345};
  auto closed = Binding(endpoint, dispatcher, Authorization::Of("echo", nobody));
  Serve(closed);
  const std::string too_big(2048, 'x');  // the binding accepts 1024 bytes

  grpc::Status unknown = Call("/v1.Echo/Nope", too_big);
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::UNIMPLEMENTED) << unknown.error_message();
  EXPECT_EQ(unknown.error_message(), "unknown method /v1.Echo/Nope on endpoint csi-proxy-echo-v1");

  grpc::Status denied = Call("/v1.Echo/Echo", too_big);
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED) << denied.error_message();

  router_->Bind(Binding(endpoint, dispatcher));  // open to every caller
  grpc::Status large = Call("/v1.Echo/Echo", too_big);
  EXPECT_EQ(large.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << large.error_message();
  EXPECT_EQ(large.error_message(), "the request is 2048 bytes; group 'echo' accepts at most 1024");

  EXPECT_EQ(dispatcher->dispatched, 0);  // the library never saw any of them
  EXPECT_EQ(observer_->started, 3);
  EXPECT_EQ(observer_->finished(),
            (std::vector<csi_proxy_status_code>{CSI_PROXY_STATUS_UNIMPLEMENTED, CSI_PROXY_STATUS_PERMISSION_DENIED,
                                                CSI_PROXY_STATUS_RESOURCE_EXHAUSTED}));
}

TEST_F(RouterTest, ACallIsAnsweredOnceAndASecondCompletionIsDropped) {
  Endpoint endpoint = EchoEndpoint({"Echo"});
  auto dispatcher = std::make_shared<FakeDispatcher>([](CallHandle call) {
    call->Complete(CSI_PROXY_STATUS_OK, {}, "first");
    call->Complete(CSI_PROXY_STATUS_INTERNAL, "second", {});
    return Status::Ok();
  });
  Serve(Binding(endpoint, dispatcher));
  std::string response;
  ASSERT_TRUE(Call("/v1.Echo/Echo", "x", &response).ok());
  EXPECT_EQ(response, "first");
  EXPECT_EQ(observer_->finished(), std::vector<csi_proxy_status_code>{CSI_PROXY_STATUS_OK});
}

TEST_F(RouterTest, ACallPastItsDeadlineIsAnsweredWithoutItsHandlerWhoseLateAnswerIsDropped) {
  Endpoint endpoint = EchoEndpoint({"Echo"});
  std::mutex mu;
  CallHandle held;
  auto dispatcher = std::make_shared<FakeDispatcher>([&](CallHandle call) {
    std::lock_guard lock(mu);
    held = std::move(call);  // the handler runs on
    return Status::Ok();
  });
  Serve(Binding(endpoint, dispatcher));
  grpc::Status status = Call("/v1.Echo/Echo", "x", nullptr, 200ms);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  // The router answered the call itself at the deadline (the observers heard of it once; as cancelled when the
  // client's cancellation arrived a moment before the server's own timer)...
  for (int i = 0; i < 200 && observer_->finished().empty(); ++i) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(observer_->finished().size(), 1u);
  EXPECT_THAT(observer_->finished()[0], AnyOf(CSI_PROXY_STATUS_DEADLINE_EXCEEDED, CSI_PROXY_STATUS_CANCELLED));
  std::lock_guard lock(mu);
  ASSERT_NE(held, nullptr);
  EXPECT_TRUE(held->IsCancelled());                     // ...the handler sees the call cancelled...
  held->Complete(CSI_PROXY_STATUS_OK, {}, "too late");  // ...and its answer goes nowhere
  EXPECT_EQ(observer_->finished().size(), 1u);
}

TEST_F(RouterTest, ACallTheInstanceCannotStartIsAnsweredWithItsReason) {
  Endpoint endpoint = EchoEndpoint({"Echo"});
  auto dispatcher = std::make_shared<FakeDispatcher>(
      [](CallHandle) { return Status(Code::kResourceExhausted, "group 'echo' is at its budget"); });
  Serve(Binding(endpoint, dispatcher));
  grpc::Status status = Call("/v1.Echo/Echo", "x");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(status.error_message(), "group 'echo' is at its budget");
}

TEST_F(RouterTest, ACallADrainingInstanceRefusesGoesToTheInstanceBoundSince) {
  Endpoint endpoint = EchoEndpoint({"Echo"});
  auto fresh = Answering();
  std::shared_ptr<const EndpointBinding> next;
  // The old instance was told to drain between the lookup and the hand-over: a reload bound the new one.
  auto draining = std::make_shared<FakeDispatcher>([&](CallHandle) {
    router_->Bind(next);
    return Status(Code::kUnavailable, "group 'echo' is stopping; retry later");
  });
  next = Binding(endpoint, fresh);
  Serve(Binding(endpoint, draining));
  std::string response;
  grpc::Status status = Call("/v1.Echo/Echo", "x", &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response, "answer:x");
  EXPECT_EQ(draining->dispatched, 1);
  EXPECT_EQ(fresh->dispatched, 1);
}

TEST_F(RouterTest, ANewBindingsMethodsAreServedAndTheOnesItDropsAreUnimplemented) {
  Endpoint before = EchoEndpoint({"Echo", "Old"});
  Endpoint after = EchoEndpoint({"Echo", "New"});
  auto dispatcher = Answering();
  Serve(Binding(before, dispatcher));
  router_->Bind(Binding(after, dispatcher));
  std::string response;
  EXPECT_TRUE(Call("/v1.Echo/New", "n", &response).ok());  // not registered with the server: the generic service
  EXPECT_EQ(response, "answer:n");
  EXPECT_EQ(Call("/v1.Echo/Old", "o").error_code(), grpc::StatusCode::UNIMPLEMENTED);  // registered, but gone
  EXPECT_TRUE(Call("/v1.Echo/Echo", "e").ok());
}

}  // namespace
}  // namespace csi_proxy::host

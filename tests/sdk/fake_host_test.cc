// The SDK's in-process host (csi_proxy/testing/fake_host.hpp): the example group's library loaded from its file
// and called through the real C ABI (what a handler sees of its call; the example's own unit test,
// sdk/examples/echo/echo_plugin_test.cc, runs too), a group linked into the test, and a library that breaks the
// contract, which the fake host reports.
#include "csi_proxy/testing/fake_host.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "csi_proxy/plugin.hpp"
#include "v1/echo.pb.h"

namespace csi_proxy::sdk::testing {
namespace {

using namespace std::chrono_literals;

v1::EchoRequest Text(const std::string& text) {
  v1::EchoRequest req;
  req.set_text(text);
  return req;
}

// ---- The example group (sdk/examples/echo), loaded from its file ------------------------------------------------

class EchoThroughTheFakeHost : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(host_.Load(CSI_PROXY_ECHO_LIBRARY).ok());
    ASSERT_TRUE(host_.Negotiate().ok());
    auto status = host_.Init("greeting = \"hi\"\n");
    ASSERT_TRUE(status.ok()) << status.message();
  }
  void TearDown() override {
    host_.Shutdown();
    EXPECT_TRUE(host_.violations().empty()) << host_.violations().front();
  }

  FakeHost host_{FakeHostOptions{.kubelet_path = "/var/lib/kubelet-test"}};
};

TEST_F(EchoThroughTheFakeHost, NegotiationNamesTheGroupItsVersionAndTheNewestAbi) {
  EXPECT_EQ(host_.group(), "echo");
  EXPECT_EQ(host_.plugin_version(), "1.0.0");
  EXPECT_EQ(host_.abi_version(), CSI_PROXY_ABI_VERSION_CURRENT);
  ASSERT_NE(host_.FindMethod("/v1.Echo/Echo"), nullptr);
  EXPECT_EQ(host_.FindMethod("/v1.Echo/Echo")->version, "v1");
  EXPECT_EQ(host_.FindMethod("/v1.Echo/WhoAmI")->flags, CSI_PROXY_METHOD_READ_ONLY);
  EXPECT_NE(host_.FindMethod("/v1alpha1.Echo/Echo"), nullptr);
  bool logged_ready = false;
  for (const auto& line : host_.log()) logged_ready |= line.message == "echo group ready, greeting 'hi'";
  EXPECT_TRUE(logged_ready);
}

TEST_F(EchoThroughTheFakeHost, TheHandlerSeesTheConfigurationTheCallerAndTheDeadline) {
  const auto deadline = std::chrono::system_clock::now() + 1h;
  v1::WhoAmIResponse resp;
  auto result = host_.Call("/v1.Echo/WhoAmI", v1::WhoAmIRequest(), &resp,
                           {.deadline = deadline, .peer = {getpid(), getuid(), getgid()}});
  ASSERT_TRUE(result.ok()) << result.Describe();
  EXPECT_EQ(resp.greeting(), "hi");
  EXPECT_EQ(resp.kubelet_path(), "/var/lib/kubelet-test");
  EXPECT_EQ(resp.pid(), getpid());
  EXPECT_EQ(resp.uid(), static_cast<int64_t>(getuid()));
  EXPECT_EQ(resp.deadline_unix_ns(),
            std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count());
}

TEST_F(EchoThroughTheFakeHost, BytesThatAreNoRequestAreInvalidArgument) {
  auto result = host_.Call("/v1.Echo/Echo", std::string("\xff\xff\xff", 3));
  EXPECT_EQ(result.code, Code::kInvalidArgument) << result.Describe();
}

TEST_F(EchoThroughTheFakeHost, ALongHandlerSeesItsCallCancelled) {
  std::atomic<bool> gone{false};
  std::thread client([&] {
    std::this_thread::sleep_for(50ms);
    gone = true;
  });
  v1::EchoRequest req = Text("slow");
  req.set_delay_ms(10000);
  v1::EchoResponse resp;
  auto result = host_.Call("/v1.Echo/Sleep", req, &resp, {.cancelled = [&] { return gone.load(); }});
  client.join();
  ASSERT_TRUE(result.ok()) << result.Describe();
  EXPECT_TRUE(resp.saw_cancellation());
}

TEST_F(EchoThroughTheFakeHost, AnUnknownMethodIsUnimplemented) {
  EXPECT_EQ(host_.Call("/v1.Echo/Nothing", "").code, Code::kUnimplemented);
}

TEST(FakeHostLoad, AFileThatIsNoLibraryIsNotFound) {
  FakeHost host;
  EXPECT_EQ(host.Load("/etc/hostname").code(), Code::kNotFound);
  EXPECT_EQ(host.Negotiate().code(), Code::kFailedPrecondition);
}

TEST(FakeHostNegotiation, AHostRangeTheLibraryDoesNotSpeakIsRefused) {
  FakeHost host({.abi_version_min = CSI_PROXY_ABI_VERSION_CURRENT + 1, .abi_version_max = 99});
  ASSERT_TRUE(host.Load(CSI_PROXY_ECHO_LIBRARY).ok());
  auto status = host.Negotiate();
  EXPECT_EQ(status.code(), Code::kFailedPrecondition);
  EXPECT_NE(status.message().find("it speaks version " + std::to_string(CSI_PROXY_ABI_VERSION_CURRENT)),
            std::string::npos)
      << status.message();
}

// ---- A group linked into the test ------------------------------------------------------------------------------

// A message type of its own (the layer needs only these four members): the bytes themselves.
struct Bytes {
  std::string data;
  bool ParseFromArray(const void* p, int size) {
    data.assign(static_cast<const char*>(p), static_cast<size_t>(size));
    return true;
  }
  bool SerializeToString(std::string* out) const {
    *out = data;
    return true;
  }
  bool ParseFromString(const std::string& in) {
    data = in;
    return true;
  }
  std::string GetTypeName() const { return "Bytes"; }
};

class ReversePlugin : public Plugin {
 public:
  Status Init(Host& host) override {
    CSI_PROXY_ASSIGN_OR_RETURN(int64_t times, host.config().GetInt("times", 1, IntRange{1, 3}));
    host.AddService("v1", "v1.Reverse").Unary<Bytes, Bytes>("Reverse", [times](const Bytes& req, Bytes& resp, auto&) {
      resp.data = req.data;
      if (times % 2 == 1) std::reverse(resp.data.begin(), resp.data.end());
      return Status::Ok();
    });
    return Status::Ok();
  }
};

}  // namespace
}  // namespace csi_proxy::sdk::testing

CSI_PROXY_PLUGIN(csi_proxy::sdk::testing::ReversePlugin, "reverse", "2.1.0")

namespace csi_proxy::sdk::testing {
namespace {

TEST(FakeHostLink, AGroupLinkedIntoTheTestIsCalledThroughTheSameAbi) {
  FakeHost host;
  host.Link(&csi_proxy_plugin_negotiate);
  ASSERT_TRUE(host.Negotiate().ok());
  EXPECT_EQ(host.group(), "reverse");
  EXPECT_EQ(host.plugin_version(), "2.1.0");
  auto bad = host.Init("times = 4\n");
  EXPECT_EQ(bad.message(), "group key 'times' must be an integer from 1 to 3, not 4");
  ASSERT_TRUE(host.Init("times = 3\n").ok());
  Bytes resp;
  auto result = host.Call("/v1.Reverse/Reverse", Bytes{"abc"}, &resp);
  ASSERT_TRUE(result.ok()) << result.Describe();
  EXPECT_EQ(resp.data, "cba");
  EXPECT_TRUE(host.violations().empty());
}

// ---- A library that breaks the contract, written against the C ABI directly -----------------------------------

const csi_proxy_host_api* careless_host = nullptr;
csi_proxy_host_call* careless_unanswered = nullptr;

void CompleteTwice(void*, csi_proxy_host_call* call, const uint8_t*, size_t) {
  careless_host->complete_call(call, CSI_PROXY_STATUS_OK, nullptr, 0, nullptr, 0);
  careless_host->complete_call(call, CSI_PROXY_STATUS_OK, nullptr, 0, nullptr, 0);
}
void CompleteWithABadCode(void*, csi_proxy_host_call* call, const uint8_t*, size_t) {
  careless_host->complete_call(call, 42, "?", 1, nullptr, 0);
}
void NeverComplete(void*, csi_proxy_host_call* call, const uint8_t*, size_t) { careless_unanswered = call; }

csi_proxy_status_code CarelessInit(const csi_proxy_host_api* host, void**, char*, size_t) {
  careless_host = host;
  const csi_proxy_method_desc methods[] = {
      {sizeof(csi_proxy_method_desc), "Twice", CompleteTwice, nullptr, 0},
      {sizeof(csi_proxy_method_desc), "BadCode", CompleteWithABadCode, nullptr, 0},
      {sizeof(csi_proxy_method_desc), "Never", NeverComplete, nullptr, 0},
  };
  csi_proxy_service_desc service{sizeof service, "v1", "v1.Careless", methods, 3, sizeof(csi_proxy_method_desc),
                                 nullptr,        0};
  host->register_service(host->host, &service);
  host->log(host->host, 7, "a level that does not exist", 27);
  return CSI_PROXY_STATUS_OK;
}
int careless_shutdowns = 0;
void CarelessShutdown(void*) { ++careless_shutdowns; }

csi_proxy_status_code CarelessNegotiate(const csi_proxy_host_offer*, csi_proxy_plugin_answer* answer) {
  static const csi_proxy_plugin_api table{sizeof table, CarelessInit, CarelessShutdown};
  answer->abi_version = CSI_PROXY_ABI_VERSION_CURRENT;
  answer->group = "careless";
  answer->plugin_version = "0.0.1";
  answer->api = &table;
  return CSI_PROXY_STATUS_OK;
}

TEST(FakeHostContract, BreachesAreReportedAndAnUnansweredCallKeepsTheLibraryFromShuttingDown) {
  {
    FakeHost host;
    host.Link(CarelessNegotiate);
    ASSERT_TRUE(host.Negotiate().ok());
    ASSERT_TRUE(host.Init().ok());
    EXPECT_TRUE(host.Call("/v1.Careless/Twice", "").ok());
    EXPECT_EQ(host.Call("/v1.Careless/BadCode", "").code, Code::kUnknown);
    auto never = host.Call("/v1.Careless/Never", "", {.wait = 20ms});
    EXPECT_FALSE(never.completed);
    host.Shutdown();
    EXPECT_EQ(careless_shutdowns, 0) << "a call may still run in the library";
    EXPECT_EQ(host.violations(), (std::vector<std::string>{
                                     "log level 7 is out of range",
                                     "/v1.Careless/Twice: completed twice",
                                     "/v1.Careless/BadCode: completed with status code 42, which gRPC does not have",
                                     "shutdown not called: 1 call(s) never completed",
                                 }));
    // The library answers at last: now it may shut down.
    careless_host->complete_call(careless_unanswered, CSI_PROXY_STATUS_OK, nullptr, 0, nullptr, 0);
  }
  EXPECT_EQ(careless_shutdowns, 1);
}

}  // namespace
}  // namespace csi_proxy::sdk::testing

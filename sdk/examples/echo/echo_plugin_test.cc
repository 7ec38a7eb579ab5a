// A unit test of the example group, as a group author writes one: the library as built, loaded into the SDK's
// in-process fake host (csi_proxy/testing/fake_host.hpp) and called through the real C ABI, without a csi-proxy
// host, sockets or gRPC. ECHO_LIBRARY is the path of the built library (see CMakeLists.txt).
#include <gtest/gtest.h>

#include <string>

#include "csi_proxy/testing/fake_host.hpp"
#include "v1/echo.pb.h"

namespace {

using csi_proxy::Code;
using csi_proxy::sdk::testing::FakeHost;

// The example group with its one key set, ready for calls.
class EchoGroup : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(host_.Load(ECHO_LIBRARY).ok());
    ASSERT_TRUE(host_.Negotiate().ok());
    auto status = host_.Init("greeting = \"hi\"\n");  // the keys of [groups.echo]
    ASSERT_TRUE(status.ok()) << status.message();
  }
  void TearDown() override {
    host_.Shutdown();
    EXPECT_TRUE(host_.violations().empty());  // every call completed once, with a gRPC code
  }

  FakeHost host_;
};

TEST_F(EchoGroup, EchoAnswersWithTheTextItWasGiven) {
  v1::EchoRequest req;
  req.set_text("hello");
  v1::EchoResponse resp;
  auto result = host_.Call("/v1.Echo/Echo", req, &resp);
  ASSERT_TRUE(result.ok()) << result.Describe();
  EXPECT_EQ(resp.text(), "hello");
}

TEST_F(EchoGroup, AFailureTheClientAsksForKeepsItsCodeAndMessage) {
  v1::EchoRequest req;
  req.set_text("no such thing");
  req.set_fail_with_code(static_cast<int32_t>(Code::kNotFound));
  auto result = host_.Call("/v1.Echo/Echo", req, static_cast<v1::EchoResponse*>(nullptr));
  EXPECT_EQ(result.code, Code::kNotFound);
  EXPECT_EQ(result.message, "no such thing");
}

TEST_F(EchoGroup, AThrowingHandlerFailsItsCallWithInternal) {
  v1::EchoRequest req;
  req.set_throw_exception(true);
  auto result = host_.Call("/v1.Echo/Echo", req, static_cast<v1::EchoResponse*>(nullptr));
  EXPECT_EQ(result.code, Code::kInternal);
  EXPECT_NE(result.message.find("asked to throw"), std::string::npos) << result.message;
}

TEST_F(EchoGroup, EchoLaterAnswersFromTheLibrarysOwnThread) {
  v1::EchoRequest req;
  req.set_text("later");
  req.set_delay_ms(20);
  v1::EchoResponse resp;
  auto result = host_.Call("/v1.Echo/EchoLater", req, &resp);
  ASSERT_TRUE(result.ok()) << result.Describe();
  EXPECT_EQ(resp.text(), "later");
}

TEST(EchoGroupConfiguration, AMisspeltKeyRefusesTheGroupQuotingTheKey) {
  FakeHost host;
  ASSERT_TRUE(host.Load(ECHO_LIBRARY).ok());
  ASSERT_TRUE(host.Negotiate().ok());
  auto status = host.Init("greting = \"hi\"\n");
  EXPECT_EQ(status.code(), Code::kInvalidArgument);
  EXPECT_EQ(status.message(), "unknown key 'greting' in [groups.echo]; known keys: greeting");
}

}  // namespace

// The call handle's cancellation listener (csi_proxy_host_call::OnCancelled), by which an isolated group's
// supervisor tells the runner at once that a call was cancelled: it runs once, when the call turns cancelled before
// the plugin completed it, or at once for a call cancelled already, and never for a call the plugin completed.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "abi/call_handle.h"

namespace csi_proxy::host {
namespace {

class Recorded final : public CallAnswerSink {
 public:
  void Answer(csi_proxy_status_code code, std::string_view, std::string_view) override {
    ++answers;
    last = code;
  }
  int answers = 0;
  csi_proxy_status_code last = CSI_PROXY_STATUS_OK;
};

CallHandle NewCall(Recorded& sink) {
  CallInfo info;
  info.group = "g";
  info.method = "/v1.G/M";
  return std::make_shared<csi_proxy_host_call>(std::move(info), grpc::Slice(std::string("req")), &sink);
}

TEST(CallHandle, ACancellationListenerRunsOnceWhenTheClientCancels) {
  Recorded sink;
  CallHandle call = NewCall(sink);
  int told = 0;
  call->OnCancelled([&] { ++told; });
  EXPECT_EQ(told, 0);
  call->Abandon(CSI_PROXY_STATUS_CANCELLED, "the client cancelled");
  EXPECT_EQ(told, 1);
  EXPECT_EQ(sink.answers, 1);
  EXPECT_EQ(sink.last, CSI_PROXY_STATUS_CANCELLED);
  call->DetachSink();  // the reactor goes: the call was told already
  EXPECT_EQ(told, 1);
}

TEST(CallHandle, AListenerSetOnACancelledCallRunsAtOnce) {
  Recorded sink;
  CallHandle call = NewCall(sink);
  call->Abandon(CSI_PROXY_STATUS_DEADLINE_EXCEEDED, "deadline");
  int told = 0;
  call->OnCancelled([&] { ++told; });
  EXPECT_EQ(told, 1);
}

TEST(CallHandle, ACallThePluginCompletedIsNotToldOfItsReactorGoing) {
  Recorded sink;
  CallHandle call = NewCall(sink);
  int told = 0;
  call->OnCancelled([&] { ++told; });
  call->Complete(CSI_PROXY_STATUS_OK, "", "answer");
  call->DetachSink();
  EXPECT_EQ(told, 0);
  EXPECT_EQ(sink.answers, 1);
}

}  // namespace
}  // namespace csi_proxy::host

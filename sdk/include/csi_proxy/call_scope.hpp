// csi_proxy/call_scope.hpp: which call the current thread works for, so that long work deep inside a group (a
// program run, a wait for the kernel) can stop once the call is cancelled or past its deadline, without every
// layer passing the call along. The C++ layer (plugin.hpp) sets it around each synchronous handler; code that runs
// outside a handler (tests, a group's own threads) sees no call and is never cancelled.
#pragma once

#include "csi_proxy/plugin_abi.h"

namespace csi_proxy::sdk {

class CallScope {
 public:
  CallScope(const csi_proxy_host_api* api, const csi_proxy_host_call* call) : saved_(Current()) {
    Current() = {api, call};
  }
  ~CallScope() { Current() = saved_; }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

  // True once the current thread's call has been cancelled by its client or its deadline has passed.
  static bool Cancelled() {
    const Entry& e = Current();
    return e.api != nullptr && e.call != nullptr && e.api->call_is_cancelled(e.call) != 0;
  }

 private:
  struct Entry {
    const csi_proxy_host_api* api = nullptr;
    const csi_proxy_host_call* call = nullptr;
  };
  static Entry& Current() {
    thread_local Entry entry;
    return entry;
  }
  Entry saved_;
};

}  // namespace csi_proxy::sdk

// See io_port_windows.h.
#include "io_port_windows.h"

namespace csi_proxy::host {
namespace {
constexpr ULONG_PTR kQuitKey = 1;
}

Status IoPort::Start(int threads) {
  port_.reset(CreateIoCompletionPort(INVALID_HANDLE_VALUE, nullptr, 0, static_cast<DWORD>(threads)));
  if (!port_.valid()) return Internal("CreateIoCompletionPort: " + ErrorText(GetLastError()));
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Run(); });
  return Status::Ok();
}

void IoPort::Stop() {
  if (!port_.valid()) return;
  for (size_t i = 0; i < threads_.size(); ++i) PostQueuedCompletionStatus(port_.get(), 0, kQuitKey, nullptr);
  for (auto& t : threads_) t.join();
  threads_.clear();
  port_.reset(nullptr);
}

Status IoPort::Associate(HANDLE handle) {
  // Without a port, CreateIoCompletionPort would make a new one that nobody waits on.
  if (!port_.valid()) return FailedPrecondition("the I/O completion port is not started");
  if (CreateIoCompletionPort(handle, port_.get(), 0, 0) == nullptr) {
    return Internal("CreateIoCompletionPort (associate): " + ErrorText(GetLastError()));
  }
  return Status::Ok();
}

bool IoPort::Post(Operation* op) { return PostQueuedCompletionStatus(port_.get(), 0, 0, op) != FALSE; }

void IoPort::Run() {
  for (;;) {
    DWORD bytes = 0;
    ULONG_PTR key = 0;
    OVERLAPPED* overlapped = nullptr;
    BOOL ok = GetQueuedCompletionStatus(port_.get(), &bytes, &key, &overlapped, INFINITE);
    if (overlapped == nullptr) {
      if (key == kQuitKey || !ok) return;
      continue;
    }
    DWORD error = ok ? 0 : GetLastError();
    static_cast<Operation*>(overlapped)->Completed(bytes, error);
  }
}

}  // namespace csi_proxy::host

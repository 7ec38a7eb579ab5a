// One I/O completion port and the threads that serve it: the named-pipe side of the host (accepting pipe
// connections and relaying their bytes) runs on it. Each overlapped operation is an IoPort::Operation whose
// Completed() runs on one of the port's threads when the operation ends.
#pragma once

#include <thread>
#include <vector>

#include "config/win32_windows.h"
#include "csi_proxy/status.hpp"

namespace csi_proxy::host {

class IoPort {
 public:
  // An overlapped operation. Reset() before each use; the object must live until Completed() has run.
  struct Operation : OVERLAPPED {
    Operation() { Reset(); }
    virtual ~Operation() = default;
    void Reset() { *static_cast<OVERLAPPED*>(this) = OVERLAPPED{}; }
    // `error` is 0 on success, else the Win32 error (ERROR_OPERATION_ABORTED after a cancellation).
    virtual void Completed(DWORD bytes, DWORD error) = 0;
  };

  IoPort() = default;
  ~IoPort() { Stop(); }
  IoPort(const IoPort&) = delete;
  IoPort& operator=(const IoPort&) = delete;

  Status Start(int threads);
  // Joins the threads. Every handle on the port must be closed and every operation completed first.
  void Stop();

  // Makes the handle's overlapped operations complete on this port (a handle can belong to one port only).
  Status Associate(HANDLE handle);
  // Runs op->Completed(0, 0) on a port thread.
  bool Post(Operation* op);

 private:
  void Run();
  UniqueHandle port_{nullptr};
  std::vector<std::thread> threads_;
};

}  // namespace csi_proxy::host

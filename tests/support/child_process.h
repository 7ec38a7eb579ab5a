// Child processes of the tests and benchmarks (the csi-proxy host, the baseline gRPC server): started with an
// argv, tied to this process (they die with it), stopped with SIGTERM, and measured through /proc.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "csi_proxy/status.hpp"

namespace csi_proxy::testing {

class ChildProcess {
 public:
  ChildProcess() = default;
  ~ChildProcess();  // SIGKILL if still running
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Starts argv[0] (an absolute path) with stdout and stderr appended to `log_path`. The child gets SIGKILL
  // when the thread that started it ends, so call this from the main thread.
  static StatusOr<ChildProcess> Start(const std::vector<std::string>& argv, const std::string& log_path);

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }

  // True once the process has exited (reaps it); `exit_status` gets the waitpid status.
  bool Exited(int* exit_status = nullptr);
  // SIGTERM, then waits up to `timeout`, then SIGKILL. Returns the waitpid status (or -1 after SIGKILL).
  int Stop(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  void Kill();

 private:
  pid_t pid_ = -1;
  int cleanup_slot_ = -1;
};

// Memory of a process from /proc/<pid>/status, in KiB; -1 when unreadable.
struct ProcessMemory {
  int64_t rss_kib = -1;  // VmRSS: resident now
  int64_t hwm_kib = -1;  // VmHWM: the peak resident size so far
  int64_t threads = -1;  // Threads
};
ProcessMemory ReadProcessMemory(pid_t pid);

}  // namespace csi_proxy::testing

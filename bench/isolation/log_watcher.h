// Follows the host's log file as it grows, waking on inotify rather than polling, so that waiting for a log
// line costs the machine nothing while other calls are being measured.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace csi_proxy::bench {

class LogWatcher {
 public:
  // Starts at the current end of `path`: only lines written from now on are seen.
  explicit LogWatcher(const std::string& path);
  ~LogWatcher();
  LogWatcher(const LogWatcher&) = delete;
  LogWatcher& operator=(const LogWatcher&) = delete;

  // The next complete new line that contains any of `needles`, or nothing after `timeout`.
  std::optional<std::string> WaitFor(const std::vector<std::string>& needles, std::chrono::milliseconds timeout);

 private:
  void ReadNew();

  int file_ = -1;
  int inotify_ = -1;
  off_t offset_ = 0;
  std::string partial_;
  std::vector<std::string> lines_;
};

}  // namespace csi_proxy::bench

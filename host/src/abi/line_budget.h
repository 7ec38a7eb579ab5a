// How many lines one caller may make the host write: refusals, failed calls and the audit log's refusal lines are
// cheap to provoke, and a line per call would let any caller fill the log (megabytes a second) and the disk. Each
// key (a uid, or a uid with a method) gets `burst` lines per window; the rest are counted, and the next line
// written for that key says how many were not.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace csi_proxy::host {

class LineBudget {
 public:
  using Clock = std::chrono::steady_clock;
  LineBudget(size_t burst, Clock::duration window) : burst_(burst), window_(window) {}

  // Whether a line for `key` may be written now. When it may, `not_written` gets the lines of that key that were
  // refused since the last one written; when it may not, the line is counted for the next.
  bool Allow(const std::string& key, uint64_t& not_written, Clock::time_point now = Clock::now());

 private:
  // Callers are few: past this many keys every count is forgotten rather than memory grown without bound.
  static constexpr size_t kMaxKeys = 4096;
  struct Window {
    Clock::time_point start;
    size_t written = 0;
    uint64_t not_written = 0;
  };
  const size_t burst_;
  const Clock::duration window_;
  std::mutex mu_;
  std::map<std::string, Window> windows_;  // guarded by mu_
};

}  // namespace csi_proxy::host

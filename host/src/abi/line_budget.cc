// See line_budget.h.
#include "abi/line_budget.h"

namespace csi_proxy::host {

bool LineBudget::Allow(const std::string& key, uint64_t& not_written, Clock::time_point now) {
  std::lock_guard lock(mu_);
  if (windows_.size() >= kMaxKeys && !windows_.count(key)) windows_.clear();
  auto [it, fresh] = windows_.try_emplace(key);
  Window& w = it->second;
  if (fresh || now - w.start >= window_) {
    w.start = now;
    w.written = 0;
  }
  if (w.written >= burst_) {
    ++w.not_written;
    return false;
  }
  ++w.written;
  not_written = w.not_written;
  w.not_written = 0;
  return true;
}

}  // namespace csi_proxy::host

// Latency samples and their percentiles.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

namespace csi_proxy::bench {

class LatencySamples {
 public:
  void Reserve(size_t n) { ns_.reserve(n); }
  void Add(std::chrono::nanoseconds d) {
    ns_.push_back(d.count());
    sorted_ = false;
  }
  void Merge(const LatencySamples& other) {
    ns_.insert(ns_.end(), other.ns_.begin(), other.ns_.end());
    sorted_ = false;
  }
  void Clear() { ns_.clear(); }
  size_t size() const { return ns_.size(); }

  // Nearest-rank percentile in microseconds; p in [0, 100].
  double PercentileUs(double p) {
    if (ns_.empty()) return 0;
    Sort();
    size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(ns_.size())));
    rank = std::clamp<size_t>(rank, 1, ns_.size());
    return static_cast<double>(ns_[rank - 1]) / 1000.0;
  }
  double MeanUs() const {
    if (ns_.empty()) return 0;
    return static_cast<double>(std::accumulate(ns_.begin(), ns_.end(), int64_t{0})) / 1000.0 /
           static_cast<double>(ns_.size());
  }
  double MaxUs() {
    if (ns_.empty()) return 0;
    Sort();
    return static_cast<double>(ns_.back()) / 1000.0;
  }

 private:
  void Sort() {
    if (!sorted_) std::sort(ns_.begin(), ns_.end());
    sorted_ = true;
  }
  std::vector<int64_t> ns_;
  bool sorted_ = false;
};

// The median of a few values (e.g. of interleaved rounds); 0 for none.
inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace csi_proxy::bench

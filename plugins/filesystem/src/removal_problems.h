// What a removal walk (forced Rmdir, RmdirContents) could not remove, and why: both OS layers collect their
// refusals here and answer with one status that names them.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "csi_proxy/status.hpp"

namespace csi_proxy::filesystem {

class RemovalProblems {
 public:
  // At most this many problems are spelled out in one error message; the rest are counted.
  static constexpr size_t kMaxReported = 8;

  void Add(Status status) {
    ++count_;
    if (shown_.size() < kMaxReported) shown_.push_back(std::move(status));
  }
  size_t count() const { return count_; }

  // OK if nothing was kept; otherwise the first problem's code and every problem's message.
  Status Summary() const {
    if (count_ == 0) return Status::Ok();
    std::string message;
    for (const Status& s : shown_) {
      if (!message.empty()) message += "; ";
      message += s.message();
    }
    if (count_ > shown_.size()) message += "; and " + std::to_string(count_ - shown_.size()) + " more";
    return Status(shown_.front().code(), message);
  }

 private:
  size_t count_ = 0;
  std::vector<Status> shown_;
};

}  // namespace csi_proxy::filesystem

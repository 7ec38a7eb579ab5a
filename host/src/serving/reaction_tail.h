// Work a read's reaction leaves to run on its own thread once gRPC no longer counts the reaction as running, so
// that a handler run there (a call the group may block in, on a gRPC thread the host borrowed) never holds the
// call's stream: the call can still be answered at its deadline, and its server shut down, while it runs.
#pragma once

#include <memory>

namespace csi_proxy::host {

class ReactionTail {
 public:
  class Work {
   public:
    virtual ~Work() = default;
    virtual void Run() = 0;
  };

  // Installed by the handler of the registered methods (inline_read_handler.h) around a read's reaction:
  // Current() is this until it goes out of scope.
  ReactionTail() : previous_(current_) { current_ = this; }
  ~ReactionTail() { current_ = previous_; }
  ReactionTail(const ReactionTail&) = delete;
  ReactionTail& operator=(const ReactionTail&) = delete;

  // The tail of the reaction running on this thread; null outside one (gRPC's own handlers, workers, timers).
  static ReactionTail* Current() { return current_; }

  bool free() const { return work_ == nullptr; }
  void Defer(std::unique_ptr<Work> work) { work_ = std::move(work); }
  // Called by the handler after it gave the reaction's reference back.
  void Run() {
    if (auto work = std::move(work_)) work->Run();
  }

 private:
  static inline thread_local ReactionTail* current_ = nullptr;
  ReactionTail* previous_;
  std::unique_ptr<Work> work_;
};

}  // namespace csi_proxy::host

// One group's execution budget: at most `workers` of its handlers run at once, at most `max_queued` calls wait
// for a worker, and anything beyond is refused. Groups never share workers, so a group whose handlers hang or
// crawl exhausts only its own budget. Workers are started on demand and end after a while without work, so an
// idle group holds no thread. A handler may also run on a thread of the caller's (TakeIdleSlot): it then holds
// one of the `workers` places like a worker's handler does.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "csi_proxy/status.hpp"

namespace csi_proxy::host {

class GroupExecutor {
 public:
  struct Limits {
    int workers = 16;
    size_t max_queued = 64;
    size_t max_queued_bytes = 16 * 1024 * 1024;  // the requests of the waiting calls, together
    std::chrono::milliseconds idle_timeout{std::chrono::seconds(30)};
  };
  // A unit of work and what it is, for reports ("/v1.Smb/NewSmbGlobalMapping"). `cancel` runs instead of `run`
  // when the executor stops before the work started, or when `abandoned` says nobody waits for it any more (a
  // waiting call answered at its deadline): such a task gives its place in the queue up.
  struct Task {
    std::string what;
    size_t bytes = 0;  // what it holds (the request), counted against max_queued_bytes while it waits
    std::function<void()> run;
    std::function<void()> cancel;
    std::function<bool()> abandoned;
  };

  GroupExecutor(std::string group, Limits limits);
  ~GroupExecutor();  // Stop(now) if not stopped; never waits for a running handler
  GroupExecutor(const GroupExecutor&) = delete;
  GroupExecutor& operator=(const GroupExecutor&) = delete;

  // Starts the task on an idle or new worker, or queues it. RESOURCE_EXHAUSTED naming the group when the budget
  // and the queue are full; UNAVAILABLE once stopping.
  Status Submit(Task task);

  // A place in the budget held by a handler that runs on the caller's thread; given back when destroyed. Until
  // then the handler counts as running (usage, Stop) and no worker starts a task in its place.
  class Slot {
   public:
    Slot(Slot&& other) noexcept;
    Slot& operator=(Slot&&) = delete;
    ~Slot();

   private:
    friend class GroupExecutor;
    struct Held;
    explicit Slot(std::unique_ptr<Held> held);
    std::unique_ptr<Held> held_;
  };
  // A place for `what` when one is free and no call waits for one (a call never overtakes those queued); nullopt
  // otherwise, and once stopping. Never waits.
  std::optional<Slot> TakeIdleSlot(const std::string& what);

  // Takes no more work; lets queued and running tasks finish until `deadline`, then cancels the queued ones.
  // Returns what is still running at the deadline (empty when every worker has finished): those workers are
  // left to finish on their own.
  std::vector<std::string> Stop(std::chrono::steady_clock::time_point deadline);

  struct Usage {
    int running = 0;
    int threads = 0;
    size_t queued = 0;
    uint64_t refused = 0;
  };
  Usage usage() const;
  const Limits& limits() const;

 private:
  struct State;
  std::shared_ptr<State> state_;  // shared with the workers, which may outlive the executor after Stop
};

}  // namespace csi_proxy::host

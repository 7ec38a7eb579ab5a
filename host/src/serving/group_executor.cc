// See group_executor.h.
#include "serving/group_executor.h"

#if defined(__linux__)
#include <pthread.h>
#endif

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace csi_proxy::host {

struct GroupExecutor::State {
  State(std::string g, Limits l) : group(std::move(g)), limits(l) {}

  const std::string group;
  const Limits limits;
  std::mutex mu;
  std::condition_variable work;  // a task was queued, or stopping
  std::condition_variable done;  // a worker finished a task or ended
  std::deque<Task> queue;
  size_t queued_bytes = 0;
  std::list<std::string> running;  // what each running handler runs: busy workers' and those in a Slot
  int threads = 0;
  int idle = 0;      // workers waiting for a task
  int starting = 0;  // workers started for a queued task that have not taken one yet
  int slots = 0;     // places held by handlers on their callers' threads (in `running` too)
  bool stopping = false;
  uint64_t refused = 0;
  // Every worker is joined once it has ended (a thread still running at exit would race the process's own exit);
  // only one still busy past Stop's deadline is detached.
  std::map<std::thread::id, std::thread> workers;
  std::vector<std::thread::id> ended;

  // Starts a worker for a queued task; the caller has checked that it has a place (threads + slots < workers).
  static void StartWorkerLocked(const std::shared_ptr<State>& self) {
    ++self->threads;
    ++self->starting;
    std::thread worker(&State::Work, self);
    self->workers.emplace(worker.get_id(), std::move(worker));
  }

  // Takes the threads of ended workers, to be joined outside the lock.
  std::vector<std::thread> TakeEnded() {
    std::vector<std::thread> out;
    for (auto id : ended) {
      auto it = workers.find(id);
      if (it == workers.end()) continue;
      out.push_back(std::move(it->second));
      workers.erase(it);
    }
    ended.clear();
    return out;
  }

  // A queued task may start: the budget has a place (handlers in a Slot hold theirs).
  bool CanStart() const { return !queue.empty() && running.size() < static_cast<size_t>(limits.workers); }
  // Queued tasks that a waiting or starting worker takes without waiting for a place: they do not count as waiting.
  size_t Takers() const {
    size_t free = running.size() < static_cast<size_t>(limits.workers) ? limits.workers - running.size() : 0;
    return std::min(static_cast<size_t>(idle + starting), free);
  }

  static void Work(std::shared_ptr<State> self) {
    State& s = *self;
#if defined(__linux__)
    // Named for its group (the kernel keeps 15 bytes), not after the thread that started it (a gRPC thread's
    // "nexting_thread"), so that top -H and a profile tell the group's workers apart.
    pthread_setname_np(pthread_self(), ("w:" + s.group).substr(0, 15).c_str());
#endif
    std::unique_lock lock(s.mu);
    --s.starting;
    for (;;) {
      if (!s.CanStart()) {
        if (s.queue.empty() && s.stopping) break;
        ++s.idle;
        bool woken = s.work.wait_for(lock, s.limits.idle_timeout,
                                     [&] { return s.CanStart() || (s.queue.empty() && s.stopping); });
        --s.idle;
        if (!woken && s.queue.empty()) break;  // idle for a while: give the thread back
        continue;
      }
      Task task = std::move(s.queue.front());
      s.queue.pop_front();
      s.queued_bytes -= task.bytes;
      auto me = s.running.insert(s.running.end(), task.what);
      lock.unlock();
      task.run();
      task = {};  // release what the task held before reporting it done
      lock.lock();
      s.running.erase(me);
      s.done.notify_all();
    }
    --s.threads;
    s.ended.push_back(std::this_thread::get_id());
    s.done.notify_all();
  }
};

namespace {
void JoinAll(std::vector<std::thread>& threads) {
  for (auto& t : threads) {
    if (t.joinable()) t.join();
  }
}
}  // namespace

struct GroupExecutor::Slot::Held {
  std::shared_ptr<State> state;
  std::list<std::string>::iterator entry;  // in state->running
};

GroupExecutor::Slot::Slot(std::unique_ptr<Held> held) : held_(std::move(held)) {}
GroupExecutor::Slot::Slot(Slot&& other) noexcept = default;

GroupExecutor::Slot::~Slot() {
  if (!held_) return;
  State& s = *held_->state;
  std::lock_guard lock(s.mu);
  s.running.erase(held_->entry);
  --s.slots;
  // A task that waited for this place: a waiting worker takes it, or a new one when none waits.
  if (!s.queue.empty() && !s.stopping) {
    if (s.idle > 0) {
      s.work.notify_one();
    } else if (s.threads + s.slots < s.limits.workers) {
      State::StartWorkerLocked(held_->state);
    }
  }
  s.done.notify_all();
}

std::optional<GroupExecutor::Slot> GroupExecutor::TakeIdleSlot(const std::string& what) {
  State& s = *state_;
  std::lock_guard lock(s.mu);
  if (s.stopping || !s.queue.empty() || s.running.size() >= static_cast<size_t>(s.limits.workers)) {
    return std::nullopt;
  }
  auto entry = s.running.insert(s.running.end(), what);
  ++s.slots;
  return Slot(std::unique_ptr<Slot::Held>(new Slot::Held{state_, entry}));
}

GroupExecutor::GroupExecutor(std::string group, Limits limits)
    : state_(std::make_shared<State>(std::move(group), limits)) {}

GroupExecutor::~GroupExecutor() { Stop(std::chrono::steady_clock::now()); }

Status GroupExecutor::Submit(Task task) {
  std::vector<std::thread> ended;
  {
    std::lock_guard lock(state_->mu);
    ended = state_->TakeEnded();
  }
  JoinAll(ended);
  std::unique_lock lock(state_->mu);
  State& s = *state_;
  if (s.stopping) return Unavailable("group '" + s.group + "' is stopping; retry later");
  std::vector<Task> given_up;  // cancelled outside the lock
  auto queue_full = [&] {
    return s.queue.size() >= s.limits.max_queued + s.Takers() ||
           s.queued_bytes + task.bytes > s.limits.max_queued_bytes;
  };
  if (queue_full()) {
    // Calls answered at their deadline while they waited give their places up before anyone is refused.
    for (auto it = s.queue.begin(); it != s.queue.end();) {
      if (it->abandoned && it->abandoned()) {
        s.queued_bytes -= it->bytes;
        given_up.push_back(std::move(*it));
        it = s.queue.erase(it);
      } else {
        ++it;
      }
    }
  }
  struct CancelLater {
    std::vector<Task>& tasks;
    std::unique_lock<std::mutex>& lock;
    ~CancelLater() {
      if (lock.owns_lock()) lock.unlock();
      for (auto& t : tasks) {
        if (t.cancel) t.cancel();
      }
    }
  } cancel_later{given_up, lock};
  size_t takers = s.Takers();
  if (takers > s.queue.size()) {
    s.queued_bytes += task.bytes;
    s.queue.push_back(std::move(task));
    s.work.notify_one();
    return Status::Ok();
  }
  if (s.threads + s.slots < s.limits.workers) {  // a new worker, and a place for it
    s.queued_bytes += task.bytes;
    s.queue.push_back(std::move(task));
    State::StartWorkerLocked(state_);
    return Status::Ok();
  }
  if (s.queue.size() - takers < s.limits.max_queued && s.queued_bytes + task.bytes <= s.limits.max_queued_bytes) {
    s.queued_bytes += task.bytes;
    s.queue.push_back(std::move(task));
    return Status::Ok();
  }
  ++s.refused;
  return Status(Code::kResourceExhausted,
                "group '" + s.group + "' is at its budget: " + std::to_string(s.limits.workers) +
                    " calls running and " + std::to_string(s.queue.size()) + " waiting; retry later");
}

std::vector<std::string> GroupExecutor::Stop(std::chrono::steady_clock::time_point deadline) {
  State& s = *state_;
  std::deque<Task> cancelled;
  std::vector<std::string> still_running;
  std::vector<std::thread> ended;
  {
    std::unique_lock lock(s.mu);
    s.stopping = true;
    s.work.notify_all();
    s.done.wait_until(lock, deadline, [&] { return s.threads == 0; });
    cancelled.swap(s.queue);
    s.queued_bytes = 0;
    s.work.notify_all();  // workers that waited for a place in the budget have nothing left to wait for
    still_running.assign(s.running.begin(), s.running.end());
    ended = s.TakeEnded();
    // Busy past the deadline: left to finish on their own (they hold the state).
    for (auto& [id, worker] : s.workers) worker.detach();
    s.workers.clear();
  }
  JoinAll(ended);
  for (auto& task : cancelled) {
    if (task.cancel) task.cancel();
  }
  return still_running;
}

const GroupExecutor::Limits& GroupExecutor::limits() const { return state_->limits; }

GroupExecutor::Usage GroupExecutor::usage() const {
  std::lock_guard lock(state_->mu);
  return {static_cast<int>(state_->running.size()), state_->threads, state_->queue.size(), state_->refused};
}

}  // namespace csi_proxy::host

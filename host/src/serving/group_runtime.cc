// See group_runtime.h.
#include "serving/group_runtime.h"

#include <spdlog/spdlog.h>

#include <optional>
#include <thread>
#include <utility>

#include "abi/library_scope.h"
#include "serving/reaction_tail.h"

namespace csi_proxy::host {
namespace {

std::atomic<int> abandoned_loads{0};    // loads given up that have not returned
std::atomic<bool> left_running{false};  // an instance stopped with a handler still running

// The gRPC threads that run the host's reactions are few and serve every endpoint of every group (gRPC 1.51's
// callback server has two, its "nexting" threads, on a machine of up to 5 cores). A handler that may block runs
// on one of them only while no other such handler does: one that hangs there holds that thread alone, calls that
// may block go to their group's workers until it returns, and the other threads go on serving every group.
class BorrowedThread {
 public:
  static std::optional<BorrowedThread> Take(const CallHandle& call) {
    bool expected = false;
    if (!taken_.compare_exchange_strong(expected, true, std::memory_order_acquire)) {
      ReportIfHeldLong();
      return std::nullopt;
    }
    {
      std::lock_guard lock(holder_mu_);
      holder_ = call;
      since_ = std::chrono::steady_clock::now();
      reported_ = false;
    }
    return BorrowedThread();
  }
  BorrowedThread(BorrowedThread&& other) noexcept : owner_(std::exchange(other.owner_, false)) {}
  BorrowedThread& operator=(BorrowedThread&&) = delete;
  ~BorrowedThread() {
    if (!owner_) return;
    CallHandle done;
    {
      std::lock_guard lock(holder_mu_);
      done = std::move(holder_);
    }
    taken_.store(false, std::memory_order_release);
  }

 private:
  BorrowedThread() = default;

  // The watchdog, run by the calls that find the thread taken: a handler that holds it for long is named once.
  static void ReportIfHeldLong() {
    std::unique_lock lock(holder_mu_, std::try_to_lock);
    if (!lock.owns_lock() || !holder_ || reported_) return;
    auto held = std::chrono::steady_clock::now() - since_;
    if (held < kLongHold) return;
    reported_ = true;
    spdlog::warn(
        "{} of group '{}' has run on one of gRPC's threads for {} ms; until it returns, calls that may block go "
        "to their groups' workers",
        holder_->info().method, holder_->info().group,
        std::chrono::duration_cast<std::chrono::milliseconds>(held).count());
  }

  static constexpr std::chrono::seconds kLongHold{1};
  static inline std::atomic<bool> taken_{false};
  static inline std::mutex holder_mu_;
  static inline CallHandle holder_;                            // guarded by holder_mu_
  static inline std::chrono::steady_clock::time_point since_;  // guarded by holder_mu_
  static inline bool reported_ = false;                        // guarded by holder_mu_
  bool owner_ = true;
};

GroupExecutor::Limits LimitsOf(const GroupConfig& group, const HostConfig& host) {
  GroupExecutor::Limits limits;
  limits.workers = group.workers > 0 ? group.workers : host.workers;
  limits.max_queued = static_cast<size_t>(group.max_queued_calls);
  limits.max_queued_bytes = std::max<size_t>(limits.max_queued_bytes, static_cast<size_t>(group.max_request_bytes));
  return limits;
}

}  // namespace

std::string GroupRuntime::Fingerprint(const GroupConfig& group, const HostConfig& host,
                                      const std::string& library_identity) {
  std::string fp = group.library + "\n";
  if (!library_identity.empty()) fp += library_identity + "\n";
  for (const auto& v : group.versions) fp += v + ",";
  auto limits = LimitsOf(group, host);
  fp += "\n" + std::to_string(limits.workers) + "/" + std::to_string(limits.max_queued) + "/" +
        std::to_string(group.max_request_bytes) + "\n";
  fp += std::string(IsolationName(group.isolation)) + "/" + std::to_string(group.restart_limit) + "/" +
        std::to_string(group.restart_window_seconds) + "/" + std::to_string(group.hang_restart_seconds) + "\n";
  // A runner confines itself once, at its start: other privileges need another runner.
  fp += DescribePrivileges(group.privileges) + "\n";
  return fp + GroupConfigToml(group, host);
}

GroupRuntime::GroupRuntime(const GroupConfig& group, const HostConfig& host, std::string fingerprint)
    : name_(group.name),
      fingerprint_(std::move(fingerprint)),
      required_(group.required),
      max_request_bytes_(static_cast<size_t>(group.max_request_bytes)),
      privileges_(group.isolation == Isolation::kProcess ? DescribePrivileges(group.privileges) : std::string()),
      executor_(group.name, LimitsOf(group, host)) {}

GroupRuntime::~GroupRuntime() { Stop(std::chrono::steady_clock::now()); }

StatusOr<std::shared_ptr<GroupRuntime>> GroupRuntime::Load(const GroupConfig& group, const HostConfig& host,
                                                           const EndpointRegistry& others) {
  // The registry only answers conflict checks while the library registers; this instance's endpoints are its own.
  EndpointRegistry scratch = others;
  // The file's identity before it is loaded: a file replaced meanwhile makes the next reload load it again.
  std::string fingerprint = Fingerprint(group, host, LibraryFileIdentity(group.library));
  std::shared_ptr<GroupRuntime> runtime(new GroupRuntime(group, host, std::move(fingerprint)));
  runtime->library_ = group.library;
  if (group.isolation == Isolation::kProcess) {
    CSI_PROXY_ASSIGN_OR_RETURN(
        runtime->runner_, RunnerSupervisor::Start(group, host, std::chrono::steady_clock::now() + host.load_timeout));
    const RunnerDescription& d = runtime->runner_->description();
    // The runner's library registered against nothing: the conflicts with the other groups are checked here.
    if (Status conflict = scratch.CheckConflicts(group.name, group.library, d.services); !conflict.ok()) {
      return Status(Code::kFailedPrecondition,
                    "group '" + group.name + "' (" + group.library + "): " + conflict.message());
    }
    for (uint32_t i = 0; i < d.method_paths.size(); ++i) runtime->runner_methods_[d.method_paths[i]] = i;
    // The supervisor's thread ends in Stop, before the watchers go.
    runtime->runner_->OnAvailability([self = runtime.get()](bool) {
      std::lock_guard lock(self->watchers_mu_);
      for (const auto& [key, changed] : self->watchers_) changed();
    });
    runtime->group_ = group.name;  // the runner refuses a library answering another group, as LoadPlugin does
    runtime->plugin_version_ = d.plugin_version;
    runtime->abi_version_ = d.abi_version;
    runtime->skipped_versions_ = d.skipped_versions;
    runtime->TakeRegistrations(d.services);
    return runtime;
  }
  CSI_PROXY_ASSIGN_OR_RETURN(auto plugin, LoadPlugin(group, host, scratch));
  runtime->group_ = plugin->group();
  runtime->plugin_version_ = plugin->plugin_version();
  runtime->abi_version_ = plugin->abi_version();
  runtime->skipped_versions_ = plugin->skipped_versions();
  runtime->TakeRegistrations(plugin->services());
  runtime->plugin_ = std::move(plugin);
  return runtime;
}

void GroupRuntime::TakeRegistrations(const std::vector<ServiceRegistration>& services) {
  services_ = services;
  EndpointRegistry mine;
  mine.Commit(group_, library_, services);
  endpoints_ = mine.endpoints();
  for (const auto& [_, endpoint] : endpoints_) {
    for (const auto& [_, handler] : endpoint.methods) method_runs_->try_emplace(&handler);
  }
}

bool GroupRuntime::LibraryCodeMayRun() { return abandoned_loads.load() > 0 || left_running.load(); }

StatusOr<std::shared_ptr<GroupRuntime>> GroupRuntime::LoadWithin(const GroupConfig& group, const HostConfig& host,
                                                                 const EndpointRegistry& others,
                                                                 std::chrono::steady_clock::time_point deadline,
                                                                 const std::atomic<bool>& stop) {
  // Shared with the loading thread, which may outlive this call; it gets copies of what it reads.
  struct Pending {
    std::mutex mu;
    std::condition_variable done_cv;
    bool done = false;                                                        // guarded by mu
    bool abandoned = false;                                                   // guarded by mu
    StatusOr<std::shared_ptr<GroupRuntime>> result = Internal("not loaded");  // guarded by mu
  };
  auto load = std::make_shared<Pending>();
  std::thread([load, group, host, others] {
    auto result = GroupRuntime::Load(group, host, others);
    std::unique_lock lock(load->mu);
    if (load->abandoned) {
      lock.unlock();
      if (result.ok()) {
        spdlog::warn("group '{}' ({}): its init returned after the load was given up; shutting it down", group.name,
                     group.library);
        (*result)->Stop(std::chrono::steady_clock::now());  // an instance made too late is shut down and unloaded
      }
      abandoned_loads.fetch_sub(1);
      return;
    }
    load->result = std::move(result);
    load->done = true;
    load->done_cv.notify_all();
  }).detach();
  std::unique_lock lock(load->mu);
  while (!load->done && !stop.load() && std::chrono::steady_clock::now() < deadline) {
    load->done_cv.wait_until(lock,
                             std::min(deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(50)));
  }
  if (load->done) return std::move(load->result);
  load->abandoned = true;
  abandoned_loads.fetch_add(1);
  const std::string what = "group '" + group.name + "' (" + group.library + "): ";
  if (stop.load()) return Unavailable(what + "the host is stopping; the load was given up");
  return Status(Code::kDeadlineExceeded, what + "loading and init did not finish within load_timeout_seconds (" +
                                             std::to_string(host.load_timeout.count()) +
                                             " s); the library stays loaded until the host exits");
}

bool GroupRuntime::Track(const CallHandle& call) {
  const std::string& method = call->info().method;
  {
    std::lock_guard lock(in_flight_->mu);
    if (in_flight_->stopping) return false;
    in_flight_->methods.insert(method);
    ++in_flight_->dispatching;
  }
  call->HandOverToPlugin(call, [in_flight = in_flight_, &method] {
    // `method` lives in the call's info, which outlives this completion.
    std::lock_guard lock(in_flight->mu);
    in_flight->methods.erase(in_flight->methods.find(method));
    if (in_flight->methods.empty()) in_flight->empty.notify_all();
  });
  return true;
}

void GroupRuntime::EndDispatch(InFlight& in_flight) {
  std::lock_guard lock(in_flight.mu);
  --in_flight.dispatching;
  in_flight.empty.notify_all();
}

namespace {
// A run longer than this is not worth a borrowed thread (the hand-off it saves costs some 35 us), and a handler
// that takes this long may be waiting on something that can take much longer.
constexpr std::chrono::milliseconds kQuickRun{1};
// Quick runs in a row (on workers) before a method borrows a thread: at first, and again after a slow run.
constexpr int kQuickRunsToBorrow = 8;
// How long the admin's status and the metrics wait for a runner to say how its budget is used (it answers in
// microseconds unless its main thread is stuck in a NONBLOCKING handler that blocks after all).
constexpr std::chrono::milliseconds kRunnerBudgetWait{100};
}  // namespace

void GroupRuntime::MethodRuns::Record(std::chrono::steady_clock::duration took) const {
  if (took > kQuickRun) {
    quick_in_a_row.store(0, std::memory_order_relaxed);
  } else if (quick_in_a_row.load(std::memory_order_relaxed) < kQuickRunsToBorrow) {
    quick_in_a_row.fetch_add(1, std::memory_order_relaxed);
  }
}

bool GroupRuntime::MethodRuns::MayBorrow() const {
  return quick_in_a_row.load(std::memory_order_relaxed) >= kQuickRunsToBorrow;
}

void GroupRuntime::RunTimed(const MethodHandler& handler, csi_proxy_host_call& call, const RunsRef& runs) {
  auto start = std::chrono::steady_clock::now();
  RunHandler(handler, call);
  if (runs.runs != nullptr) runs.runs->Record(std::chrono::steady_clock::now() - start);
}

// Holds what the run needs after the router's call and this instance may be gone (a call answered at its
// deadline, a reload that replaced the instance): the handler, the call, the place in the budget, the borrowed
// thread and the count of calls being dispatched, which covers the run so that a drain waits for it as for a
// non-blocking call.
struct GroupRuntime::BorrowedRun final : ReactionTail::Work {
  BorrowedRun(const MethodHandler& h, CallHandle c, RunsRef r, GroupExecutor::Slot s, BorrowedThread t,
              std::shared_ptr<InFlight> f)
      : handler(h),
        call(std::move(c)),
        runs(std::move(r)),
        slot(std::move(s)),
        thread(std::move(t)),
        in_flight(std::move(f)) {}
  ~BorrowedRun() override {
    if (!ran) {  // the reaction's thread never got to it: the call must still be answered
      call->Complete(static_cast<csi_proxy_status_code>(Code::kUnavailable), "the call could not start; retry", {});
    }
    // The place is given back before the dispatch ends: a drain that saw no call dispatched finds no handler
    // running in the budget either.
    slot.reset();
    thread.reset();
    EndDispatch(*in_flight);
  }
  void Run() override {
    ran = true;
    RunTimed(handler, *call, runs);
  }

  const MethodHandler handler;
  const CallHandle call;
  const RunsRef runs;
  std::optional<GroupExecutor::Slot> slot;
  std::optional<BorrowedThread> thread;
  const std::shared_ptr<InFlight> in_flight;
  bool ran = false;
};

bool GroupRuntime::RunOnBorrowedThread(const MethodHandler& handler, const CallHandle& call, const RunsRef& runs) {
  ReactionTail* tail = ReactionTail::Current();
  if (tail == nullptr || !tail->free() || runs.runs == nullptr || !runs.runs->MayBorrow()) return false;
  auto thread = BorrowedThread::Take(call);
  if (!thread) return false;
  auto slot = executor_.TakeIdleSlot(call->info().method);
  if (!slot) return false;
  tail->Defer(std::make_unique<BorrowedRun>(handler, call, runs, std::move(*slot), std::move(*thread), in_flight_));
  return true;
}

Status GroupRuntime::Dispatch(const MethodHandler& handler, CallHandle call) {
  if (!Track(call)) return Unavailable("group '" + name_ + "' is stopping; retry later");
  // A call counted before the group began to stop reaches the executor before it stops (StopAndUnload waits for
  // it), so it runs with the calls the group drains rather than being refused on the way.
  struct Dispatched {
    InFlight* in_flight;
    ~Dispatched() {
      if (in_flight != nullptr) EndDispatch(*in_flight);
    }
  } dispatched{in_flight_.get()};
  if (runner_) {
    // The runner runs it within the group's budget, inline or on a worker, as in process.
    auto method = runner_methods_.find(call->info().method);
    uint32_t index = method != runner_methods_.end() ? method->second : UINT32_MAX;
    runner_->Send(index, std::move(call));
    return Status::Ok();
  }
  if (handler.non_blocking()) {
    // Declared never to block: run here, on the thread that read the request, with no hand-off to a worker.
    // The group's workers and queue are for calls that may wait; this one answers before it returns.
    RunHandler(handler, *call);
    return Status::Ok();
  }
  auto runs_of = method_runs_->find(&handler);
  const RunsRef runs{method_runs_, runs_of == method_runs_->end() ? nullptr : &runs_of->second};
  if (RunOnBorrowedThread(handler, call, runs)) {
    dispatched.in_flight = nullptr;  // the run ends the dispatch
    return Status::Ok();
  }
  GroupExecutor::Task task;
  task.what = call->info().method;
  task.bytes = call->request().size();
  task.abandoned = [call] { return call->IsCancelled(); };
  task.run = [handler, call, runs] { RunTimed(handler, *call, runs); };
  task.cancel = [call] {
    call->Complete(static_cast<csi_proxy_status_code>(Code::kUnavailable),
                   "the group stopped before the call could start; retry", {});
  };
  Status submitted = executor_.Submit(std::move(task));
  if (!submitted.ok()) {
    // Never reached the plugin: complete it here so that the count of calls in flight stays true.
    call->Complete(static_cast<csi_proxy_status_code>(submitted.code()), submitted.message(), {});
  }
  return Status::Ok();  // answered either way
}

void GroupRuntime::RunHandler(const MethodHandler& handler, csi_proxy_host_call& call) {
  if (call.IsCancelled()) {
    return call.Complete(static_cast<csi_proxy_status_code>(Code::kDeadlineExceeded),
                         "the call was cancelled or its deadline passed before it started", {});
  }
  std::string_view request = call.request();
  LibraryScope scope(call.info().group.c_str(), call.info().method.c_str());
  handler.fn(handler.plugin_method_ctx, &call, reinterpret_cast<const uint8_t*>(request.data()), request.size());
}

std::vector<std::string> GroupRuntime::Stop(std::chrono::steady_clock::time_point deadline) {
  if (stopped_) return {};
  stopped_ = true;
  State serving = State::kServing;
  state_.compare_exchange_strong(serving, State::kDraining);
  std::vector<std::string> running = StopAndUnload(deadline);
  set_state(State::kStopped);
  return running;
}

const char* GroupRuntime::StateName(State state) {
  switch (state) {
    case State::kServing:
      return "serving";
    case State::kReloading:
      return "reloading";
    case State::kDraining:
      return "draining";
    case State::kStopped:
      return "stopped";
    case State::kFailed:
      return "failed";
  }
  return "unknown";
}

std::vector<std::string> GroupRuntime::StopAndUnload(std::chrono::steady_clock::time_point deadline) {
  {
    std::unique_lock lock(in_flight_->mu);
    in_flight_->stopping = true;  // no new call starts, inline or on a worker
    in_flight_->empty.wait_until(lock, deadline, [&] { return in_flight_->dispatching == 0; });
  }
  std::vector<std::string> running = executor_.Stop(deadline);
  {
    // Calls whose handler returned but that the plugin completes later, from a thread of its own.
    std::unique_lock lock(in_flight_->mu);
    in_flight_->empty.wait_until(lock, deadline, [&] { return in_flight_->methods.empty(); });
    if (running.empty()) running.assign(in_flight_->methods.begin(), in_flight_->methods.end());
  }
  if (runner_) {
    // Nothing of the library runs in the host: its runner finishes or is killed, and what it had is answered.
    if (!running.empty()) {
      spdlog::warn("group '{}': its runner still ran {} call(s) at the deadline; they are answered UNAVAILABLE", name_,
                   running.size());
    }
    runner_->Stop(deadline);
    return {};
  }
  if (!plugin_) return running;
  if (running.empty()) {
    plugin_->Shutdown();
    plugin_.reset();
    return running;
  }
  // Something may still execute in the library: it must stay mapped, and its shutdown must not run under it.
  (void)plugin_.release();
  left_running.store(true);
  return running;
}

GroupRuntime::State GroupRuntime::state() const {
  State state = state_.load(std::memory_order_relaxed);
  if (state == State::kServing && runner_ && runner_->usage().failed) return State::kFailed;
  return state;
}

bool GroupRuntime::Available() const { return !runner_ || !runner_->usage().failed; }

void GroupRuntime::AddWatcher(const void* key, std::function<void()> changed) {
  std::lock_guard lock(watchers_mu_);
  watchers_[key] = std::move(changed);
}

void GroupRuntime::RemoveWatcher(const void* key) {
  std::lock_guard lock(watchers_mu_);
  watchers_.erase(key);
}

GroupRuntime::Usage GroupRuntime::usage() const {
  Usage u;
  u.executor = executor_.usage();
  if (runner_) {
    u.runner = runner_->usage();
    // The budget is the runner's: the host's executor never runs an isolated group's call.
    const RunnerBudget budget = runner_->Budget(kRunnerBudgetWait);
    u.executor.running = budget.running;
    u.executor.queued = budget.queued;
    u.executor.refused = budget.refused;
    u.executor.threads = budget.threads;
  }
  std::lock_guard lock(in_flight_->mu);
  u.in_flight = in_flight_->methods.size();
  return u;
}

}  // namespace csi_proxy::host

// One group's execution budget (serving/group_executor.h): how many handlers run at once, how many calls wait,
// what is refused, and that an idle group gives its threads back.
#include "serving/group_executor.h"

#include <gtest/gtest.h>
#if defined(__linux__)
#include <pthread.h>
#endif

#include <atomic>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

namespace csi_proxy::host {
namespace {

using namespace std::chrono_literals;

// Holds the tasks that wait on it until it opens; counts the tasks that started.
class Gate {
 public:
  void Wait() {
    std::unique_lock lock(mu_);
    ++started_;
    changed_.notify_all();
    changed_.wait(lock, [&] { return open_; });
  }
  void Open() {
    std::lock_guard lock(mu_);
    open_ = true;
    changed_.notify_all();
  }
  // Waits until `n` tasks have started; false after two seconds.
  bool AwaitStarted(int n) {
    std::unique_lock lock(mu_);
    return changed_.wait_for(lock, 2s, [&] { return started_ >= n; });
  }
  int started() {
    std::lock_guard lock(mu_);
    return started_;
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  bool open_ = false;
  int started_ = 0;
};

struct Counters {
  std::atomic<int> ran{0};
  std::atomic<int> cancelled{0};
};

GroupExecutor::Task Blocking(const std::shared_ptr<Gate>& gate, const std::shared_ptr<Counters>& counters,
                             std::string what = "/v1.Test/Block", size_t bytes = 0) {
  GroupExecutor::Task task;
  task.what = std::move(what);
  task.bytes = bytes;
  task.run = [gate, counters] {
    gate->Wait();
    ++counters->ran;
  };
  task.cancel = [counters] { ++counters->cancelled; };
  return task;
}

// Polls `condition` for up to two seconds.
template <typename Condition>
bool Eventually(Condition condition) {
  for (auto until = std::chrono::steady_clock::now() + 2s; std::chrono::steady_clock::now() < until;) {
    if (condition()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return condition();
}

GroupExecutor::Limits LimitsOf(int workers, size_t max_queued) {
  GroupExecutor::Limits limits;
  limits.workers = workers;
  limits.max_queued = max_queued;
  return limits;
}

TEST(GroupExecutor, AtMostItsWorkersRunAtOnceAndTheOtherCallsWait) {
  auto gate = std::make_shared<Gate>();
  auto counters = std::make_shared<Counters>();
  GroupExecutor executor("disk", LimitsOf(2, 8));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(executor.Submit(Blocking(gate, counters)).ok());

  ASSERT_TRUE(gate->AwaitStarted(2));
  std::this_thread::sleep_for(50ms);  // a third worker would have started by now
  EXPECT_EQ(gate->started(), 2);
  GroupExecutor::Usage usage = executor.usage();
  EXPECT_EQ(usage.running, 2);
  EXPECT_EQ(usage.threads, 2);
  EXPECT_EQ(usage.queued, 3u);

  gate->Open();
  EXPECT_TRUE(Eventually([&] { return counters->ran == 5; }));
  EXPECT_EQ(counters->cancelled, 0);
}

TEST(GroupExecutor, ACallBeyondTheQueueIsRefusedNamingTheGroup) {
  auto gate = std::make_shared<Gate>();
  auto counters = std::make_shared<Counters>();
  GroupExecutor executor("smb", LimitsOf(1, 1));
  ASSERT_TRUE(executor.Submit(Blocking(gate, counters)).ok());  // runs
  ASSERT_TRUE(executor.Submit(Blocking(gate, counters)).ok());  // waits

  Status refused = executor.Submit(Blocking(gate, counters));
  EXPECT_EQ(refused.code(), Code::kResourceExhausted);
  EXPECT_NE(refused.message().find("group 'smb' is at its budget"), std::string::npos) << refused.message();
  EXPECT_EQ(executor.usage().refused, 1u);

  gate->Open();
  EXPECT_TRUE(Eventually([&] { return counters->ran == 2; }));  // the refused call never runs
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(counters->ran, 2);
}

TEST(GroupExecutor, TheWaitingRequestsAreBoundedInBytesToo) {
  auto gate = std::make_shared<Gate>();
  auto counters = std::make_shared<Counters>();
  GroupExecutor::Limits limits = LimitsOf(1, 100);
  limits.max_queued_bytes = 1000;
  GroupExecutor executor("volume", limits);
  ASSERT_TRUE(executor.Submit(Blocking(gate, counters, "/v1.Test/Run", 900)).ok());
  ASSERT_TRUE(gate->AwaitStarted(1));  // running: its bytes no longer wait
  ASSERT_TRUE(executor.Submit(Blocking(gate, counters, "/v1.Test/Wait", 900)).ok());

  EXPECT_EQ(executor.Submit(Blocking(gate, counters, "/v1.Test/Big", 200)).code(), Code::kResourceExhausted);
  EXPECT_TRUE(executor.Submit(Blocking(gate, counters, "/v1.Test/Small", 100)).ok());
  gate->Open();
  EXPECT_TRUE(Eventually([&] { return counters->ran == 3; }));
}

TEST(GroupExecutor, AWaitingCallNobodyWaitsForAnyMoreGivesItsPlaceUp) {
  auto gate = std::make_shared<Gate>();
  auto counters = std::make_shared<Counters>();
  GroupExecutor executor("iscsi", LimitsOf(1, 1));
  ASSERT_TRUE(executor.Submit(Blocking(gate, counters)).ok());
  ASSERT_TRUE(gate->AwaitStarted(1));
  auto answered = std::make_shared<std::atomic<bool>>(false);
  GroupExecutor::Task waiting = Blocking(gate, counters, "/v1.Test/AnsweredAtItsDeadline");
  waiting.abandoned = [answered] { return answered->load(); };
  ASSERT_TRUE(executor.Submit(std::move(waiting)).ok());
  EXPECT_EQ(executor.Submit(Blocking(gate, counters)).code(), Code::kResourceExhausted);

  answered->store(true);  // the waiting call was answered at its deadline
  EXPECT_TRUE(executor.Submit(Blocking(gate, counters)).ok());
  EXPECT_EQ(counters->cancelled, 1);  // the abandoned one, never run
  gate->Open();
  EXPECT_TRUE(Eventually([&] { return counters->ran == 2; }));
}

TEST(GroupExecutor, WorkersEndAfterTheIdleTimeoutSoAnIdleGroupHoldsNoThread) {
  auto gate = std::make_shared<Gate>();
  auto counters = std::make_shared<Counters>();
  GroupExecutor::Limits limits = LimitsOf(3, 8);
  limits.idle_timeout = 50ms;
  GroupExecutor executor("system", limits);
  EXPECT_EQ(executor.usage().threads, 0);  // none before the first call
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(executor.Submit(Blocking(gate, counters)).ok());
  ASSERT_TRUE(gate->AwaitStarted(3));
  EXPECT_EQ(executor.usage().threads, 3);
  gate->Open();

  EXPECT_TRUE(Eventually([&] { return executor.usage().threads == 0; })) << executor.usage().threads;
  EXPECT_EQ(counters->ran, 3);
  // A call after that starts a worker again.
  ASSERT_TRUE(executor.Submit(Blocking(gate, counters)).ok());
  EXPECT_TRUE(Eventually([&] { return counters->ran == 4; }));
}

TEST(GroupExecutor, StopCancelsWhatWaitsNamesWhatStillRunsAndTakesNoMore) {
  auto gate = std::make_shared<Gate>();
  auto counters = std::make_shared<Counters>();
  GroupExecutor executor("filesystem", LimitsOf(1, 4));
  ASSERT_TRUE(executor.Submit(Blocking(gate, counters, "/v1.Filesystem/Hangs")).ok());
  ASSERT_TRUE(gate->AwaitStarted(1));
  ASSERT_TRUE(executor.Submit(Blocking(gate, counters, "/v1.Filesystem/Waits")).ok());

  std::vector<std::string> running = executor.Stop(std::chrono::steady_clock::now() + 100ms);
  EXPECT_EQ(running, std::vector<std::string>{"/v1.Filesystem/Hangs"});
  EXPECT_EQ(counters->cancelled, 1);
  Status after = executor.Submit(Blocking(gate, counters));
  EXPECT_EQ(after.code(), Code::kUnavailable);
  EXPECT_NE(after.message().find("group 'filesystem' is stopping"), std::string::npos) << after.message();

  gate->Open();  // the handler left running finishes on its own
  EXPECT_TRUE(Eventually([&] { return counters->ran == 1; }));
}

TEST(GroupExecutor, AHandlerOnTheCallersThreadHoldsAPlaceInTheBudgetUntilItEnds) {
  auto gate = std::make_shared<Gate>();
  auto counters = std::make_shared<Counters>();
  GroupExecutor executor("disk", LimitsOf(2, 8));
  std::optional<GroupExecutor::Slot> here = executor.TakeIdleSlot("/v1.Disk/OnTheCallersThread");
  ASSERT_TRUE(here.has_value());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(executor.Submit(Blocking(gate, counters)).ok());

  // One place is the slot's: one worker runs, two calls wait, and no second slot is given.
  ASSERT_TRUE(gate->AwaitStarted(1));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(gate->started(), 1);
  EXPECT_EQ(executor.usage().running, 2);
  EXPECT_EQ(executor.usage().queued, 2u);
  EXPECT_FALSE(executor.TakeIdleSlot("/v1.Disk/Another").has_value());

  here.reset();  // the handler on the caller's thread returned: a waiting call takes its place
  EXPECT_TRUE(gate->AwaitStarted(2));
  gate->Open();
  EXPECT_TRUE(Eventually([&] { return counters->ran == 3; }));
  EXPECT_TRUE(Eventually([&] { return executor.usage().running == 0; }));
}

TEST(GroupExecutor, NoSlotWhileCallsWaitSoNoCallOvertakesThem) {
  auto gate = std::make_shared<Gate>();
  auto counters = std::make_shared<Counters>();
  GroupExecutor executor("volume", LimitsOf(1, 8));
  ASSERT_TRUE(executor.TakeIdleSlot("/v1.Volume/Free").has_value());  // taken and given back at once
  ASSERT_TRUE(executor.Submit(Blocking(gate, counters)).ok());
  ASSERT_TRUE(gate->AwaitStarted(1));
  EXPECT_FALSE(executor.TakeIdleSlot("/v1.Volume/BudgetFull").has_value());
  gate->Open();
  EXPECT_TRUE(Eventually([&] { return executor.usage().running == 0; }));
  EXPECT_TRUE(executor.TakeIdleSlot("/v1.Volume/FreeAgain").has_value());

  // With every place taken and a call waiting, a place given back goes to the waiting call, not to a new slot.
  auto gate2 = std::make_shared<Gate>();
  ASSERT_TRUE(executor.Submit(Blocking(gate2, counters)).ok());
  ASSERT_TRUE(gate2->AwaitStarted(1));
  ASSERT_TRUE(executor.Submit(Blocking(gate2, counters, "/v1.Volume/Waits")).ok());
  EXPECT_FALSE(executor.TakeIdleSlot("/v1.Volume/WouldOvertake").has_value());
  gate2->Open();
  EXPECT_TRUE(Eventually([&] { return counters->ran == 3; }));
}

TEST(GroupExecutor, APlaceHeldOnTheCallersThreadCountsWhenCallsAreRefused) {
  auto gate = std::make_shared<Gate>();
  auto counters = std::make_shared<Counters>();
  GroupExecutor executor("iscsi", LimitsOf(1, 0));
  std::optional<GroupExecutor::Slot> here = executor.TakeIdleSlot("/v1alpha2.Iscsi/OnTheCallersThread");
  ASSERT_TRUE(here.has_value());
  // The one place is held and nothing may wait: refused at once, no worker started.
  EXPECT_EQ(executor.Submit(Blocking(gate, counters)).code(), Code::kResourceExhausted);
  EXPECT_EQ(executor.usage().threads, 0);
  here.reset();
  ASSERT_TRUE(executor.Submit(Blocking(gate, counters)).ok());
  gate->Open();
  EXPECT_TRUE(Eventually([&] { return counters->ran == 1; }));
}

TEST(GroupExecutor, StopNamesAHandlerStillRunningOnTheCallersThreadAndGivesNoSlotAfter) {
  GroupExecutor executor("smb", LimitsOf(4, 4));
  std::optional<GroupExecutor::Slot> hung = executor.TakeIdleSlot("/v1.Smb/HangsOnTheCallersThread");
  ASSERT_TRUE(hung.has_value());
  std::vector<std::string> running = executor.Stop(std::chrono::steady_clock::now() + 50ms);
  EXPECT_EQ(running, std::vector<std::string>{"/v1.Smb/HangsOnTheCallersThread"});
  EXPECT_FALSE(executor.TakeIdleSlot("/v1.Smb/AfterStop").has_value());
  hung.reset();  // returns after the executor stopped: nothing is left to notify but the state it shares
  EXPECT_EQ(executor.usage().running, 0);
}

#if defined(__linux__)
// A worker is named for its group ("w:" and the name, within the kernel's 15 bytes), not after the thread that
// started it (a gRPC thread), so that top -H and a profile tell the groups' workers apart.
TEST(GroupExecutor, AWorkerIsNamedForItsGroup) {
  for (const std::string group : {"disk", "a-third-party-group"}) {
    GroupExecutor executor(group, LimitsOf(1, 1));
    auto named = std::make_shared<std::promise<std::string>>();
    GroupExecutor::Task task;
    task.what = "/v1.Test/Name";
    task.run = [named] {
      char name[16] = {};
      pthread_getname_np(pthread_self(), name, sizeof name);
      named->set_value(name);
    };
    ASSERT_TRUE(executor.Submit(std::move(task)).ok());
    auto got = named->get_future();
    ASSERT_EQ(got.wait_for(2s), std::future_status::ready);
    EXPECT_EQ(got.get(), ("w:" + group).substr(0, 15));
  }
}
#endif

}  // namespace
}  // namespace csi_proxy::host

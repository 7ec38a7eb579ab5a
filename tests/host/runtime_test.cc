// Groups live on their own at run time, tried through the real host and its sockets: each group has its own
// budget, a call is answered at its deadline whatever its handler does, shutdown is bounded (also during a reload,
// and whatever a library's init or shutdown does) and waits for no idle client, SIGHUP applies a new configuration
// group by group without touching what did not change, a reload's loading has a deadline of its own, and the
// admin's status answers at once while a reload drains.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <csignal>

#include <atomic>
#include <filesystem>
#include <future>
#include <iostream>
#include <thread>

#include "csi_proxy/admin/v1/admin.grpc.pb.h"
#include "grpc_client.h"
#include "host_process.h"
#include "v1/echo.pb.h"

namespace csi_proxy::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string Fixture(const std::string& name) { return BuildDir() + "/tests/fixtures/libcsi-proxy-" + name + ".so"; }

std::string BlockerGroup(const std::string& library, const std::string& tag, const std::string& extra = "") {
  return "[groups.blocker]\nlibrary = \"" + library + "\"\ntag = \"" + tag + "\"\n" + extra;
}
const std::string kEcho = "[groups.echo]\n";

v1::EchoRequest Req(const std::string& text, uint32_t delay_ms = 0) {
  v1::EchoRequest r;
  r.set_text(text);
  r.set_delay_ms(delay_ms);
  return r;
}

std::string TagOf(HostProcess& host) {
  v1::EchoResponse resp;
  auto s = Call(Dial(host.endpoint("csi-proxy-blocker-v1")), "/v1.Blocker/Tag", Req(""), &resp);
  return s.ok() ? resp.text() : "error: " + s.error_message();
}

// Waits (bounded) until the admin socket's Status shows `group` running `n` handlers and `queued` calls waiting.
bool WaitUntilRunning(HostProcess& host, const std::string& group, int n, int queued = 0) {
  auto admin = admin::v1::Admin::NewStub(Dial(host.admin_socket()));
  auto deadline = Clock::now() + std::chrono::seconds(20);
  while (Clock::now() < deadline) {
    grpc::ClientContext ctx;
    admin::v1::StatusResponse status;
    if (admin->Status(&ctx, admin::v1::StatusRequest(), &status).ok()) {
      for (const auto& g : status.groups()) {
        if (g.name() == group && g.running() == n && g.queued() == queued) return true;
      }
    }
    std::this_thread::sleep_for(milliseconds(10));
  }
  return false;
}

ino_t InodeOf(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

TEST(GroupBudget, AGroupWhoseHandlersHangExhaustsOnlyItsOwnBudget) {
  HostProcess host(kEcho + BlockerGroup(Fixture("blocker1"), "a", "workers = 2\nmax_queued_calls = 2\n"));
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1", "csi-proxy-blocker-v1"})) << host.error();
  auto blocker = Dial(host.endpoint("csi-proxy-blocker-v1"));
  // Two running and two waiting fill the budget...
  std::vector<std::future<grpc::Status>> blocked;
  for (int i = 0; i < 4; ++i) {
    blocked.push_back(std::async(std::launch::async, [&] {
      v1::EchoResponse resp;
      return Call(blocker, "/v1.Blocker/Block", Req("ignore-cancel", 4000), &resp, milliseconds(2000));
    }));
  }
  ASSERT_TRUE(WaitUntilRunning(host, "blocker", 2, 2));
  // ...so the next call of that group is refused at once, naming the group.
  v1::EchoResponse resp;
  auto refused = Call(blocker, "/v1.Blocker/Block", Req("", 10), &resp);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_NE(refused.error_message().find("group 'blocker'"), std::string::npos) << refused.error_message();

  // Another group is not slowed down (a generous bound: such a call takes about a millisecond).
  auto echo = Dial(host.endpoint("csi-proxy-echo-v1"));
  for (int i = 0; i < 20; ++i) {
    auto begin = Clock::now();
    ASSERT_TRUE(Call(echo, "/v1.Echo/Echo", Req("fast"), &resp).ok());
    EXPECT_LT(Clock::now() - begin, milliseconds(500));
  }
  // The hung calls are answered at their deadline although their handlers still run.
  for (auto& f : blocked) EXPECT_EQ(f.get().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  // The two that waited gave their places up: a new call waits for a worker instead of being refused. (The host
  // takes the deadline from the call's timeout when the call arrives, a moment after the client set it.)
  std::this_thread::sleep_for(milliseconds(300));
  auto waited = Call(blocker, "/v1.Blocker/Tag", Req(""), &resp, milliseconds(10000));
  EXPECT_TRUE(waited.ok()) << waited.error_message();
  // Once the handlers return, the budget is free again.
  std::this_thread::sleep_for(milliseconds(3000));
  EXPECT_TRUE(Call(blocker, "/v1.Blocker/Tag", Req(""), &resp).ok());
  EXPECT_EQ(host.Stop(), 0);
}

TEST(GroupBudget, NonBlockingMethodsTakeNoWorkerAndAnswerWhileTheBudgetIsFull) {
  // The echo group's Echo is registered CSI_PROXY_METHOD_NONBLOCKING; Sleep is not.
  HostProcess host(kEcho + "workers = 1\nmax_queued_calls = 0\n");
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1"})) << host.error();
  auto echo = Dial(host.endpoint("csi-proxy-echo-v1"));
  auto sleeping = std::async(std::launch::async, [&] {
    v1::EchoResponse resp;
    return Call(echo, "/v1.Echo/Sleep", Req("", 1500), &resp, milliseconds(5000));
  });
  ASSERT_TRUE(WaitUntilRunning(host, "echo", 1));
  v1::EchoResponse resp;
  // The one worker is busy and nothing may wait: a blocking method is refused...
  EXPECT_EQ(Call(echo, "/v1.Echo/Sleep", Req("", 10), &resp).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  // ...while a non-blocking one runs on the thread that read it.
  auto answered = Call(echo, "/v1.Echo/Echo", Req("inline"), &resp);
  ASSERT_TRUE(answered.ok()) << answered.error_message();
  EXPECT_EQ(resp.text(), "inline");
  EXPECT_TRUE(sleeping.get().ok());
  EXPECT_EQ(host.Stop(), 0);
}

// One round of the test below; `borrowed` tells whether the hang ran on the borrowed thread.
void HangOnTheBorrowedThreadInABudgetOfOne(bool* borrowed) {
  HostProcess host(kEcho + BlockerGroup(Fixture("blocker1"), "a", "workers = 1\nmax_queued_calls = 0\n"),
                   "shutdown_timeout_seconds = 1\n");
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1", "csi-proxy-blocker-v1"})) << host.error();
  auto blocker = Dial(host.endpoint("csi-proxy-blocker-v1"));
  v1::EchoResponse resp;
  for (int i = 0; i < 20; ++i) {
    // A call sent the moment the previous answer arrives may find that handler still holding the one place (it
    // returns just after it answered): it is refused, and tried again.
    grpc::Status quick;
    for (int attempt = 0; attempt < 5; ++attempt) {
      quick = Call(blocker, "/v1.Blocker/Block", Req("at-once"), &resp);
      if (quick.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED) break;
      std::this_thread::sleep_for(milliseconds(5));
    }
    ASSERT_TRUE(quick.ok()) << quick.error_message();
  }
  // The last quick handler has given its place back, so the one place is free for the call that hangs.
  ASSERT_TRUE(WaitUntilRunning(host, "blocker", 0));
  auto begin = Clock::now();
  auto hung = std::async(std::launch::async, [&] {
    return Call(blocker, "/v1.Blocker/Block", Req("ignore-cancel", 5000), &resp, milliseconds(500));
  });
  ASSERT_TRUE(WaitUntilRunning(host, "blocker", 1));
  // Its place is taken: with one worker and no queue, the group's next call is refused at once.
  v1::EchoResponse other;
  EXPECT_EQ(Call(blocker, "/v1.Blocker/Tag", Req(""), &other).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  // Another group's calls, those that may block (on a worker now) and the non-blocking ones, are not delayed.
  auto echo = Dial(host.endpoint("csi-proxy-echo-v1"));
  for (int i = 0; i < 30; ++i) {
    auto started = Clock::now();
    ASSERT_TRUE(Call(echo, "/v1.Echo/Sleep", Req("worker"), &other).ok());
    ASSERT_TRUE(Call(echo, "/v1.Echo/Echo", Req("inline"), &other).ok());
    EXPECT_LT(Clock::now() - started, milliseconds(250));
  }
  EXPECT_EQ(hung.get().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_LT(Clock::now() - begin, milliseconds(1500));
  // The handler still runs on the borrowed gRPC thread (it ignores the cancellation): a call that would borrow it
  // and finds it taken for over a second names it in the log. The method's own quick calls would (their place is
  // taken: refused). The second counts from when the handler began, which a loaded machine puts later than
  // `begin`: calls keep coming until the line is there or the handler nears its end.
  const std::string line = "/v1.Blocker/Block of group 'blocker' has run on one of gRPC's threads for";
  std::this_thread::sleep_until(begin + milliseconds(1200));
  while (host.log().find(line) == std::string::npos && Clock::now() < begin + milliseconds(4000)) {
    EXPECT_EQ(Call(blocker, "/v1.Blocker/Block", Req("at-once"), &other).error_code(),
              grpc::StatusCode::RESOURCE_EXHAUSTED);
    std::this_thread::sleep_for(milliseconds(50));
  }
  *borrowed = host.log().find(line) != std::string::npos;
  // The stop ends at its timeout, the handler still hanging on the borrowed thread.
  auto stopping = Clock::now();
  EXPECT_EQ(host.Stop(milliseconds(10000)), 0);
  EXPECT_LT(Clock::now() - stopping, milliseconds(3000));
}

// A method without the NONBLOCKING flag that has answered quickly runs on the gRPC thread that read its request
// (the borrowed thread); when it then hangs there, it holds its place in its group's budget, is answered at its
// deadline, delays no other group's calls, and the stop ends at its timeout.
TEST(GroupBudget, AQuickMethodThatHangsOnTheBorrowedThreadHoldsOnlyItsOwnPlace) {
  // Under a heavy load a quick run can take over a millisecond, and the method's next run then goes to a worker:
  // such a round proves what it asserts for a worker, and the test tries again with a new host (three at most).
  for (int round = 0; round < 3; ++round) {
    bool borrowed = false;
    HangOnTheBorrowedThreadInABudgetOfOne(&borrowed);
    if (HasFatalFailure() || borrowed) return;
    std::cerr << "round " << round + 1 << ": the hang ran on a worker, not on the borrowed thread; again\n";
  }
  ADD_FAILURE() << "in three rounds the hang never ran on the borrowed thread (the log never named it)";
}

TEST(CallDeadline, AHandlerStillRunningAtTheDeadlineIsAnsweredThenAndItsLateResultDropped) {
  HostProcess host(BlockerGroup(Fixture("blocker1"), "a"));
  ASSERT_TRUE(host.Start({"csi-proxy-blocker-v1"})) << host.error();
  auto blocker = Dial(host.endpoint("csi-proxy-blocker-v1"));
  v1::EchoResponse resp;
  auto begin = Clock::now();
  auto s = Call(blocker, "/v1.Blocker/Block", Req("ignore-cancel", 1500), &resp, milliseconds(300));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_LT(Clock::now() - begin, milliseconds(1200));
  // The handler returns later; its completion is dropped and the host keeps serving.
  std::this_thread::sleep_for(milliseconds(1500));
  EXPECT_EQ(TagOf(host), "1.0.0:a");
  EXPECT_NE(host.log().find("had already been answered; result dropped"), std::string::npos) << host.log();
}

TEST(HostShutdown, IsBoundedByItsTimeoutWhenAHandlerNeverReturns) {
  HostProcess host(kEcho + BlockerGroup(Fixture("blocker1"), "a"), "shutdown_timeout_seconds = 1\n");
  ASSERT_TRUE(host.Start({"csi-proxy-blocker-v1"})) << host.error();
  auto stuck = std::async(std::launch::async, [&] {
    v1::EchoResponse resp;
    return Call(Dial(host.endpoint("csi-proxy-blocker-v1")), "/v1.Blocker/Block", Req("ignore-cancel", 60000), &resp,
                milliseconds(120000));
  });
  ASSERT_TRUE(WaitUntilRunning(host, "blocker", 1));
  auto begin = Clock::now();
  EXPECT_EQ(host.Stop(milliseconds(10000)), 0);
  EXPECT_LT(Clock::now() - begin, milliseconds(5000));
  EXPECT_NE(stuck.get().error_code(), grpc::StatusCode::OK);
  std::string log = host.log();
  EXPECT_NE(log.find("group blocker (" + Fixture("blocker1") + ") still runs /v1.Blocker/Block past the timeout"),
            std::string::npos)
      << log;
  EXPECT_FALSE(fs::exists(host.endpoint("csi-proxy-blocker-v1")));
  EXPECT_FALSE(fs::exists(host.endpoint("csi-proxy-echo-v1")));
}

// Makes /v1.Blocker/Block quick 20 times, so that its next run borrows a gRPC thread, then hangs it there for a
// minute, ignoring its cancellation; the future has the hung call's answer.
std::future<grpc::Status> HangOnTheBorrowedThread(HostProcess& host) {
  auto blocker = Dial(host.endpoint("csi-proxy-blocker-v1"));
  v1::EchoResponse resp;
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(Call(blocker, "/v1.Blocker/Block", Req("at-once"), &resp).ok());
  auto stuck = std::async(std::launch::async, [blocker] {
    v1::EchoResponse r;
    return Call(blocker, "/v1.Blocker/Block", Req("ignore-cancel", 60000), &r, milliseconds(120000));
  });
  EXPECT_TRUE(WaitUntilRunning(host, "blocker", 1));
  return stuck;
}

// As above, for a handler that hangs on the gRPC thread the host borrowed (a quick method that stopped being
// quick): the stop still ends at its timeout, answering the call and naming the handler.
TEST(HostShutdown, IsBoundedByItsTimeoutWhenAHandlerNeverReturnsOnTheBorrowedThread) {
  HostProcess host(kEcho + BlockerGroup(Fixture("blocker1"), "a"), "shutdown_timeout_seconds = 1\n");
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1", "csi-proxy-blocker-v1"})) << host.error();
  auto stuck = HangOnTheBorrowedThread(host);
  auto begin = Clock::now();
  EXPECT_EQ(host.Stop(milliseconds(10000)), 0);
  EXPECT_LT(Clock::now() - begin, milliseconds(4000));
  EXPECT_EQ(stuck.get().error_code(), grpc::StatusCode::UNAVAILABLE);
  std::string log = host.log();
  EXPECT_NE(log.find("group blocker (" + Fixture("blocker1") + ") still runs /v1.Blocker/Block past the timeout"),
            std::string::npos)
      << log;
  EXPECT_FALSE(fs::exists(host.endpoint("csi-proxy-blocker-v1")));
}

// A reload that disables a group whose handler hangs on the borrowed thread ends at the drain's timeout, leaving
// the handler to return on its own; the other group keeps serving throughout.
TEST(Reload, AGroupItDisablesWhileItsHandlerHangsOnTheBorrowedThreadEndsAtTheTimeout) {
  HostProcess host(kEcho + BlockerGroup(Fixture("blocker1"), "a"), "shutdown_timeout_seconds = 1\n");
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1", "csi-proxy-blocker-v1"})) << host.error();
  auto stuck = HangOnTheBorrowedThread(host);
  host.WriteConfig(kEcho, "shutdown_timeout_seconds = 1\n");
  auto begin = Clock::now();
  ASSERT_TRUE(host.Reload(milliseconds(10000))) << host.log();
  EXPECT_LT(Clock::now() - begin, milliseconds(4000));
  EXPECT_NE(host.log().find("group 'blocker' disabled"), std::string::npos) << host.log();
  EXPECT_EQ(stuck.get().error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_FALSE(fs::exists(host.endpoint("csi-proxy-blocker-v1")));
  v1::EchoResponse resp;
  ASSERT_TRUE(Call(Dial(host.endpoint("csi-proxy-echo-v1")), "/v1.Echo/Echo", Req("after"), &resp).ok());
  EXPECT_EQ(resp.text(), "after");
  EXPECT_EQ(host.Stop(milliseconds(10000)), 0);
}

TEST(Reload, EnablesAndDisablesGroupsWithoutTouchingTheOthers) {
  HostProcess host(kEcho);
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1"})) << host.error();
  ino_t echo_socket = InodeOf(host.endpoint("csi-proxy-echo-v1"));
  auto echo = Dial(host.endpoint("csi-proxy-echo-v1"));
  v1::EchoResponse resp;
  ASSERT_TRUE(Call(echo, "/v1.Echo/Echo", Req("before"), &resp).ok());

  host.WriteConfig(kEcho + BlockerGroup(Fixture("blocker1"), "a"));
  ASSERT_TRUE(host.Reload()) << host.log();
  EXPECT_EQ(TagOf(host), "1.0.0:a");
  EXPECT_NE(host.log().find("group 'blocker' enabled"), std::string::npos) << host.log();

  host.WriteConfig(kEcho);
  ASSERT_TRUE(host.Reload()) << host.log();
  EXPECT_FALSE(fs::exists(host.endpoint("csi-proxy-blocker-v1")));
  EXPECT_NE(host.log().find("group 'blocker' disabled"), std::string::npos) << host.log();

  // The unaffected group kept its socket and its connection.
  EXPECT_EQ(InodeOf(host.endpoint("csi-proxy-echo-v1")), echo_socket);
  ASSERT_TRUE(Call(echo, "/v1.Echo/Echo", Req("after"), &resp).ok());
  EXPECT_EQ(host.Stop(), 0);
}

TEST(Reload, ChangedKeysLoadANewInstanceWhileTheOldOneFinishesItsCall) {
  HostProcess host(BlockerGroup(Fixture("blocker1"), "old"));
  ASSERT_TRUE(host.Start({"csi-proxy-blocker-v1"})) << host.error();
  ino_t socket = InodeOf(host.endpoint("csi-proxy-blocker-v1"));
  auto in_flight = std::async(std::launch::async, [&] {
    v1::EchoResponse resp;
    auto s = Call(Dial(host.endpoint("csi-proxy-blocker-v1")), "/v1.Blocker/Block", Req("", 1000), &resp);
    return s.ok() ? resp.text() : "error: " + s.error_message();
  });
  ASSERT_TRUE(WaitUntilRunning(host, "blocker", 1));
  host.WriteConfig(BlockerGroup(Fixture("blocker1"), "new"));
  ASSERT_TRUE(host.Reload()) << host.log();
  EXPECT_EQ(in_flight.get(), "old");  // finished by the instance it started on
  EXPECT_EQ(TagOf(host), "1.0.0:new");
  EXPECT_EQ(InodeOf(host.endpoint("csi-proxy-blocker-v1")), socket);
  EXPECT_NE(host.log().find("group 'blocker' reloaded"), std::string::npos) << host.log();
  EXPECT_EQ(host.Stop(), 0);
}

TEST(Reload, AChangedVersionsListAddsAndRemovesOnlyThoseEndpoints) {
  HostProcess host("[groups.echo]\nversions = [\"v1\"]\n");
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1"})) << host.error();
  ino_t v1_socket = InodeOf(host.endpoint("csi-proxy-echo-v1"));
  EXPECT_FALSE(fs::exists(host.endpoint("csi-proxy-echo-v1alpha1")));
  host.WriteConfig("[groups.echo]\nversions = [\"v1\", \"v1alpha1\"]\n");
  ASSERT_TRUE(host.Reload()) << host.log();
  EXPECT_TRUE(SocketAccepts(host.endpoint("csi-proxy-echo-v1alpha1")));
  EXPECT_EQ(InodeOf(host.endpoint("csi-proxy-echo-v1")), v1_socket);
  host.WriteConfig("[groups.echo]\nversions = [\"v1alpha1\"]\n");
  ASSERT_TRUE(host.Reload()) << host.log();
  EXPECT_FALSE(fs::exists(host.endpoint("csi-proxy-echo-v1")));
  EXPECT_TRUE(SocketAccepts(host.endpoint("csi-proxy-echo-v1alpha1")));
  EXPECT_EQ(host.Stop(), 0);
}

TEST(Reload, ANewBuildAtTheSamePathReplacesTheLoadedOne) {
  HostProcess host("");
  std::string library = host.dir() + "/libcsi-proxy-blocker.so";
  fs::copy_file(Fixture("blocker1"), library);
  host.WriteConfig(BlockerGroup(library, "x"));
  ASSERT_TRUE(host.Start({"csi-proxy-blocker-v1"})) << host.error();
  EXPECT_EQ(TagOf(host), "1.0.0:x");
  // Installed as package managers do: written beside, renamed over.
  fs::copy_file(Fixture("blocker2"), library + ".new");
  fs::rename(library + ".new", library);
  ASSERT_TRUE(host.Reload()) << host.log();
  EXPECT_EQ(TagOf(host), "2.0.0:x");
  EXPECT_NE(host.log().find("plugin version 2.0.0"), std::string::npos) << host.log();
  EXPECT_EQ(host.Stop(), 0);
}

// The host's server registers the methods an endpoint has when it starts; methods an upgrade adds are served too,
// and those it takes away are unimplemented, whichever way gRPC routes them.
TEST(Reload, MethodsAnUpgradeAddsAreServedAndThoseItRemovesAreUnimplemented) {
  HostProcess host(BlockerGroup(Fixture("blocker1"), "x"));
  ASSERT_TRUE(host.Start({"csi-proxy-blocker-v1"})) << host.error();
  auto call = [&](const std::string& method) {
    v1::EchoResponse resp;
    grpc::Status s = Call(Dial(host.endpoint("csi-proxy-blocker-v1")), "/v1.Blocker/" + method, Req(""), &resp);
    return s.ok() ? resp.text() : "code " + std::to_string(s.error_code()) + ": " + s.error_message();
  };
  const std::string unimplemented = "code " + std::to_string(grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(call("OnlyIn1"), "1.0.0");
  EXPECT_EQ(call("OnlyIn2").rfind(unimplemented, 0), 0u) << call("OnlyIn2");
  host.WriteConfig(BlockerGroup(Fixture("blocker2"), "x"));
  ASSERT_TRUE(host.Reload()) << host.log();
  EXPECT_EQ(call("OnlyIn2"), "2.0.0");
  EXPECT_EQ(call("OnlyIn1").rfind(unimplemented, 0), 0u) << call("OnlyIn1");
  EXPECT_EQ(call("Tag"), "2.0.0:x");
  host.WriteConfig(BlockerGroup(Fixture("blocker1"), "x"));
  ASSERT_TRUE(host.Reload()) << host.log();
  EXPECT_EQ(call("OnlyIn1"), "1.0.0");
  EXPECT_EQ(call("OnlyIn2").rfind(unimplemented, 0), 0u) << call("OnlyIn2");
  EXPECT_EQ(host.Stop(), 0);
}

TEST(Reload, ANewLibraryPathIsLoaded) {
  HostProcess host(BlockerGroup(Fixture("blocker1"), "x"));
  ASSERT_TRUE(host.Start({"csi-proxy-blocker-v1"})) << host.error();
  host.WriteConfig(BlockerGroup(Fixture("blocker2"), "x"));
  ASSERT_TRUE(host.Reload()) << host.log();
  EXPECT_EQ(TagOf(host), "2.0.0:x");
  EXPECT_EQ(host.Stop(), 0);
}

TEST(Reload, AConfigurationThatDoesNotParseChangesNothing) {
  HostProcess host(kEcho + BlockerGroup(Fixture("blocker1"), "x"));
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1", "csi-proxy-blocker-v1"})) << host.error();
  host.WriteConfig("[groups.blocker\nthis is not toml");
  ASSERT_TRUE(host.Reload()) << host.log();
  EXPECT_NE(host.log().find("reload refused, nothing changed"), std::string::npos) << host.log();
  host.WriteConfig(kEcho + "workers = 0\n");  // valid TOML, invalid value
  ASSERT_TRUE(host.Reload()) << host.log();
  EXPECT_NE(host.log().find("groups.echo.workers must be an integer from 1 to 1024"), std::string::npos) << host.log();
  EXPECT_EQ(TagOf(host), "1.0.0:x");
  v1::EchoResponse resp;
  EXPECT_TRUE(Call(Dial(host.endpoint("csi-proxy-echo-v1")), "/v1.Echo/Echo", Req("x"), &resp).ok());
  EXPECT_EQ(host.Stop(), 0);
}

TEST(Reload, ANewLibraryThatFailsKeepsTheOldOneServing) {
  HostProcess host(BlockerGroup(Fixture("blocker1"), "x"));
  ASSERT_TRUE(host.Start({"csi-proxy-blocker-v1"})) << host.error();
  // A library of another group under the table: refused, as any library that fails to load.
  host.WriteConfig(BlockerGroup(Fixture("initfails"), "x"));
  ASSERT_TRUE(host.Reload()) << host.log();
  std::string log = host.log();
  EXPECT_NE(log.find("group 'blocker' (" + Fixture("initfails") + "): the library answers the group name 'initfails'"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("the loaded instance keeps serving"), std::string::npos) << log;
  EXPECT_EQ(TagOf(host), "1.0.0:x");
  EXPECT_EQ(host.Stop(), 0);
}

TEST(Reload, ClientsOfOtherGroupsSeeNoFailureWhileAGroupIsEnabledDisabledAndUpgraded) {
  HostProcess host(kEcho);
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1"})) << host.error();
  std::atomic<bool> done{false};
  std::atomic<int> calls{0}, failures{0};
  std::thread client([&] {
    auto echo = Dial(host.endpoint("csi-proxy-echo-v1"));
    while (!done) {
      v1::EchoResponse resp;
      if (!Call(echo, "/v1.Echo/Echo", Req("x"), &resp).ok()) ++failures;
      ++calls;
    }
  });
  for (int i = 0; i < 20; ++i) {
    host.WriteConfig(kEcho + BlockerGroup(Fixture(i % 2 ? "blocker2" : "blocker1"), std::to_string(i)));
    ASSERT_TRUE(host.Reload()) << host.log();  // enabled, then upgraded
    host.WriteConfig(kEcho + BlockerGroup(Fixture(i % 2 ? "blocker1" : "blocker2"), std::to_string(i)));
    ASSERT_TRUE(host.Reload()) << host.log();
    host.WriteConfig(kEcho);
    ASSERT_TRUE(host.Reload()) << host.log();  // disabled
  }
  done = true;
  client.join();
  EXPECT_GT(calls.load(), 60);
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(host.Stop(), 0);
}

TEST(Reload, ClientsOfAnUpgradedGroupSeeNoFailure) {
  HostProcess host(BlockerGroup(Fixture("blocker1"), "0"));
  ASSERT_TRUE(host.Start({"csi-proxy-blocker-v1"})) << host.error();
  std::atomic<bool> done{false};
  std::atomic<int> calls{0}, failures{0};
  std::string last_failure;
  std::thread client([&] {
    auto blocker = Dial(host.endpoint("csi-proxy-blocker-v1"));
    while (!done) {
      v1::EchoResponse resp;
      auto s = Call(blocker, "/v1.Blocker/Tag", Req(""), &resp);
      if (!s.ok()) {
        ++failures;
        last_failure = s.error_message();
      }
      ++calls;
    }
  });
  for (int i = 1; i <= 20; ++i) {
    host.WriteConfig(BlockerGroup(Fixture(i % 2 ? "blocker2" : "blocker1"), std::to_string(i)));
    ASSERT_TRUE(host.Reload()) << host.log();
  }
  done = true;
  client.join();
  EXPECT_GT(calls.load(), 20);
  EXPECT_EQ(failures.load(), 0) << last_failure;
  EXPECT_EQ(TagOf(host), "1.0.0:20");
  EXPECT_EQ(host.Stop(), 0);
}

TEST(StrictConfiguration, AMisspeltGroupKeyRefusesTheStartWhateverRequiredSays) {
  HostProcess host("[groups.echo]\nrequired = false\ngreting = \"hi\"\n");
  EXPECT_EQ(host.RunToExit({}), 1);
  std::string log = host.log();
  // file:line:key, the library's known keys and the host's own.
  EXPECT_NE(log.find(host.config_path() + ":"), std::string::npos) << log;
  EXPECT_NE(log.find(": groups.echo.greting: unknown key 'greting' in [groups.echo]; known keys: greeting"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("keys the host itself reads in a group table: allowed_gids, allowed_uids, enabled"),
            std::string::npos)
      << log;
  EXPECT_EQ(host.RunToExit({"--check-config"}), 1);
  EXPECT_NE(host.log().find("refused: group 'echo'"), std::string::npos) << host.log();
}

TEST(StrictConfiguration, AMisspeltGroupKeyRefusesTheWholeReload) {
  HostProcess host(kEcho + BlockerGroup(Fixture("blocker1"), "x"));
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1", "csi-proxy-blocker-v1"})) << host.error();
  // A typo in one group, a legitimate change in another: neither is applied.
  host.WriteConfig("[groups.echo]\ngreting = \"hi\"\n" + BlockerGroup(Fixture("blocker1"), "y"));
  ASSERT_TRUE(host.Reload()) << host.log();
  EXPECT_NE(host.log().find("reload refused, nothing changed"), std::string::npos) << host.log();
  EXPECT_EQ(TagOf(host), "1.0.0:x");
  v1::EchoResponse resp;
  EXPECT_TRUE(Call(Dial(host.endpoint("csi-proxy-echo-v1")), "/v1.Echo/Echo", Req("x"), &resp).ok());
  EXPECT_EQ(host.Stop(), 0);
}

TEST(StrictConfiguration, OneLibraryUnderTwoGroupTablesIsRefusedNamingBoth) {
  HostProcess host(BlockerGroup(Fixture("blocker1"), "x") + "[groups.other]\nlibrary = \"" + Fixture("blocker1") +
                   "\"\n");
  EXPECT_EQ(host.RunToExit({"--check-config"}), 1);
  EXPECT_NE(host.log().find("groups.other loads " + Fixture("blocker1") + ", which [groups.blocker] loads already"),
            std::string::npos)
      << host.log();
}

TEST(AdminSocket, IsRootOnlyAndServesReloadAndStatus) {
  HostProcess host(kEcho);
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1"})) << host.error();
  struct stat st {};
  ASSERT_EQ(stat(host.admin_socket().c_str(), &st), 0) << host.log();
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto admin = admin::v1::Admin::NewStub(Dial(host.admin_socket()));

  host.WriteConfig(kEcho + BlockerGroup(Fixture("blocker1"), "a", "workers = 3\n"));
  grpc::ClientContext reload_ctx;
  admin::v1::ReloadResponse reloaded;
  ASSERT_TRUE(admin->Reload(&reload_ctx, admin::v1::ReloadRequest(), &reloaded).ok());
  EXPECT_TRUE(reloaded.config_ok());
  ASSERT_EQ(reloaded.applied_size(), 1) << reloaded.summary();
  EXPECT_NE(reloaded.applied(0).find("group 'blocker' enabled"), std::string::npos) << reloaded.summary();
  EXPECT_EQ(TagOf(host), "1.0.0:a");

  grpc::ClientContext status_ctx;
  admin::v1::StatusResponse status;
  ASSERT_TRUE(admin->Status(&status_ctx, admin::v1::StatusRequest(), &status).ok());
  ASSERT_EQ(status.groups_size(), 2);
  const auto& blocker = status.groups(0);  // by name: blocker, echo
  EXPECT_EQ(blocker.name(), "blocker");
  EXPECT_EQ(blocker.library(), Fixture("blocker1"));
  EXPECT_EQ(blocker.plugin_version(), "1.0.0");
  EXPECT_EQ(blocker.workers(), 3);
  ASSERT_EQ(blocker.endpoints_size(), 1);
  EXPECT_EQ(blocker.endpoints(0), "csi-proxy-blocker-v1");
  EXPECT_EQ(host.Stop(), 0);
  EXPECT_FALSE(fs::exists(host.admin_socket()));
}

// Channels that each made one call and now sit idle, as a CSI driver's channels do between calls.
std::vector<std::shared_ptr<grpc::Channel>> IdleChannels(HostProcess& host, int v1, int v1alpha1) {
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  v1::EchoResponse resp;
  for (int i = 0; i < v1 + v1alpha1; ++i) {
    bool first = i < v1;
    // A channel of its own each (gRPC would otherwise share one connection between channels to one socket).
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    auto channel =
        grpc::CreateCustomChannel("unix:" + host.endpoint(first ? "csi-proxy-echo-v1" : "csi-proxy-echo-v1alpha1"),
                                  grpc::InsecureChannelCredentials(), args);
    EXPECT_TRUE(Call(channel, first ? "/v1.Echo/Echo" : "/v1alpha1.Echo/Echo", Req("x"), &resp).ok());
    channels.push_back(channel);
  }
  return channels;
}

// The milliseconds the last reload took, from its line ("reload finished in N ms"); -1 without one.
int64_t LastReloadMs(const std::string& log) {
  const std::string marker = "reload finished in ";
  size_t at = log.rfind(marker);
  return at == std::string::npos ? -1 : std::stoll(log.substr(at + marker.size()));
}

TEST(HostShutdown, IdleChannelsDoNotDelayTheStop) {
  HostProcess host(kEcho);
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1", "csi-proxy-echo-v1alpha1"})) << host.error();
  auto channels = IdleChannels(host, 3, 2);
  auto begin = Clock::now();
  EXPECT_EQ(host.Stop(), 0);
  EXPECT_LT(Clock::now() - begin, milliseconds(1000)) << host.log();
}

TEST(HostShutdown, ACallInFlightFinishesAndThenTheStopIsImmediate) {
  HostProcess host(kEcho);
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1", "csi-proxy-echo-v1alpha1"})) << host.error();
  auto channels = IdleChannels(host, 3, 2);
  auto in_flight = std::async(std::launch::async, [&] {
    v1::EchoResponse resp;
    return Call(Dial(host.endpoint("csi-proxy-echo-v1")), "/v1.Echo/Sleep", Req("slept", 1000), &resp);
  });
  std::this_thread::sleep_for(milliseconds(200));  // the call reaches its handler
  auto begin = Clock::now();
  EXPECT_EQ(host.Stop(), 0);
  EXPECT_LT(Clock::now() - begin, milliseconds(1800)) << host.log();
  EXPECT_TRUE(in_flight.get().ok());
}

TEST(Reload, AGroupItDisablesDoesNotWaitForItsIdleClients) {
  HostProcess host(kEcho + BlockerGroup(Fixture("blocker1"), "a"));
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1", "csi-proxy-blocker-v1"})) << host.error();
  auto channels = IdleChannels(host, 3, 2);
  host.WriteConfig(BlockerGroup(Fixture("blocker1"), "a"));  // echo goes away
  ASSERT_TRUE(host.Reload()) << host.log();
  EXPECT_NE(host.log().find("group 'echo' disabled"), std::string::npos) << host.log();
  EXPECT_GE(LastReloadMs(host.log()), 0) << host.log();
  EXPECT_LT(LastReloadMs(host.log()), 1000) << host.log();
  EXPECT_EQ(host.Stop(), 0);
}

TEST(AdminSocket, StatusAndDescriptorsAnswerAtOnceWhileAReloadDrainsAHungCall) {
  HostProcess host(kEcho + BlockerGroup(Fixture("blocker1"), "old"), "shutdown_timeout_seconds = 4\n");
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1", "csi-proxy-blocker-v1"})) << host.error();
  auto stuck = std::async(std::launch::async, [&] {
    v1::EchoResponse resp;
    return Call(Dial(host.endpoint("csi-proxy-blocker-v1")), "/v1.Blocker/Block", Req("ignore-cancel", 60000), &resp,
                milliseconds(120000));
  });
  ASSERT_TRUE(WaitUntilRunning(host, "blocker", 1));
  host.WriteConfig(kEcho + BlockerGroup(Fixture("blocker1"), "new"), "shutdown_timeout_seconds = 4\n");
  auto reloaded = std::async(std::launch::async, [&] { return host.Reload(); });
  std::this_thread::sleep_for(milliseconds(500));  // the reload now drains the old instance, for 4 s
  auto admin = admin::v1::Admin::NewStub(Dial(host.admin_socket()));
  auto begin = Clock::now();
  std::vector<std::future<bool>> statuses;
  for (int i = 0; i < 4; ++i) {
    statuses.push_back(std::async(std::launch::async, [&] {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + milliseconds(2000));
      admin::v1::StatusResponse status;
      return admin->Status(&ctx, admin::v1::StatusRequest(), &status).ok();
    }));
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + milliseconds(2000));
  admin::v1::StatusResponse status;
  ASSERT_TRUE(admin->Status(&ctx, admin::v1::StatusRequest(), &status).ok());
  for (auto& s : statuses) EXPECT_TRUE(s.get());
  grpc::ClientContext descriptors_ctx;
  descriptors_ctx.set_deadline(std::chrono::system_clock::now() + milliseconds(2000));
  admin::v1::DescriptorsRequest which;
  which.set_endpoint("csi-proxy-echo-v1");
  admin::v1::DescriptorsResponse descriptors;
  EXPECT_TRUE(admin->Descriptors(&descriptors_ctx, which, &descriptors).ok());
  // Every endpoint still answers at once, and the status shows the instance that drains.
  v1::EchoResponse resp;
  EXPECT_TRUE(
      Call(Dial(host.endpoint("csi-proxy-echo-v1")), "/v1.Echo/Echo", Req("x"), &resp, milliseconds(2000)).ok());
  EXPECT_EQ(TagOf(host), "1.0.0:new");
  EXPECT_LT(Clock::now() - begin, milliseconds(1500));
  std::vector<std::string> blocker_states;
  for (const auto& g : status.groups()) {
    if (g.name() == "blocker") blocker_states.push_back(g.state());
  }
  EXPECT_EQ(blocker_states, (std::vector<std::string>{"serving", "reloading"}));  // the new, and the old draining
  EXPECT_TRUE(reloaded.get());
  EXPECT_EQ(host.Stop(), 0);
  EXPECT_NE(stuck.get().error_code(), grpc::StatusCode::OK);
}

TEST(Reload, AnInitThatDoesNotReturnInTimeFailsItsGroupAndTheOldInstanceKeepsServing) {
  HostProcess host(kEcho + BlockerGroup(Fixture("blocker1"), "old"), "load_timeout_seconds = 1\n");
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1", "csi-proxy-blocker-v1"})) << host.error();
  host.WriteConfig(kEcho + BlockerGroup(Fixture("blocker1"), "new", "init_sleep_ms = 600000\n"),
                   "load_timeout_seconds = 1\n");
  auto begin = Clock::now();
  ASSERT_TRUE(host.Reload(milliseconds(10000))) << host.log();
  EXPECT_LT(Clock::now() - begin, milliseconds(3000));
  EXPECT_NE(host.log().find("loading and init did not finish within load_timeout_seconds (1 s)"), std::string::npos)
      << host.log();
  EXPECT_NE(host.log().find("(the loaded instance keeps serving)"), std::string::npos) << host.log();
  EXPECT_EQ(TagOf(host), "1.0.0:old");
  v1::EchoResponse resp;
  EXPECT_TRUE(Call(Dial(host.endpoint("csi-proxy-echo-v1")), "/v1.Echo/Echo", Req("x"), &resp).ok());
  // The init still runs in its thread: the host exits without waiting for it (or unloading the library under it).
  begin = Clock::now();
  EXPECT_EQ(host.Stop(milliseconds(10000)), 0);
  EXPECT_LT(Clock::now() - begin, milliseconds(2000));
  EXPECT_NE(host.log().find("a library's init that was given up, or a handler past its deadline, still runs"),
            std::string::npos)
      << host.log();
}

TEST(HostStart, AnInitThatDoesNotReturnInTimeIsRefusedLikeAnyFailedLoad) {
  const std::string hung = BlockerGroup(Fixture("blocker1"), "a", "init_sleep_ms = 600000\n");
  HostProcess optional(kEcho + hung, "load_timeout_seconds = 1\n");
  ASSERT_TRUE(optional.Start({"csi-proxy-echo-v1"})) << optional.error();
  EXPECT_NE(optional.log().find("did not finish within load_timeout_seconds (1 s)"), std::string::npos)
      << optional.log();
  EXPECT_NE(optional.log().find("(skipped)"), std::string::npos) << optional.log();
  EXPECT_EQ(optional.Stop(milliseconds(10000)), 0);

  HostProcess required(kEcho + hung + "required = true\n", "load_timeout_seconds = 1\n");
  auto begin = Clock::now();
  EXPECT_EQ(required.RunToExit({}, milliseconds(10000)), 1);
  EXPECT_LT(Clock::now() - begin, milliseconds(4000));
  EXPECT_NE(required.log().find("(required: refusing to start)"), std::string::npos) << required.log();
}

TEST(HostShutdown, SigtermDuringAReloadWhoseInitNeverReturnsEndsAtOnce) {
  HostProcess host(BlockerGroup(Fixture("blocker1"), "old"));
  ASSERT_TRUE(host.Start({"csi-proxy-blocker-v1"})) << host.error();
  host.WriteConfig(BlockerGroup(Fixture("blocker1"), "new", "init_sleep_ms = 600000\n"));
  ASSERT_EQ(kill(host.pid(), SIGHUP), 0);
  std::this_thread::sleep_for(milliseconds(500));  // the reload waits for the init (load_timeout_seconds: 30)
  auto begin = Clock::now();
  EXPECT_EQ(host.Stop(milliseconds(10000)), 0) << host.log();
  EXPECT_LT(Clock::now() - begin, milliseconds(2000)) << host.log();
  EXPECT_NE(host.log().find("the host is stopping"), std::string::npos) << host.log();
}

TEST(HostShutdown, SigtermDuringAReloadsDrainTakesTheTimeoutOnceNotTwice) {
  HostProcess host(BlockerGroup(Fixture("blocker1"), "old"), "shutdown_timeout_seconds = 3\n");
  ASSERT_TRUE(host.Start({"csi-proxy-blocker-v1"})) << host.error();
  auto stuck = std::async(std::launch::async, [&] {
    v1::EchoResponse resp;
    return Call(Dial(host.endpoint("csi-proxy-blocker-v1")), "/v1.Blocker/Block", Req("ignore-cancel", 60000), &resp,
                milliseconds(120000));
  });
  ASSERT_TRUE(WaitUntilRunning(host, "blocker", 1));
  host.WriteConfig(BlockerGroup(Fixture("blocker1"), "new"), "shutdown_timeout_seconds = 3\n");
  ASSERT_EQ(kill(host.pid(), SIGHUP), 0);
  std::this_thread::sleep_for(milliseconds(1000));  // the reload drains the old instance until 3 s after it began
  auto begin = Clock::now();
  EXPECT_EQ(host.Stop(milliseconds(15000)), 0) << host.log();
  EXPECT_LT(Clock::now() - begin, milliseconds(4500)) << host.log();  // twice the timeout before: 5 s
  EXPECT_NE(stuck.get().error_code(), grpc::StatusCode::OK);
}

TEST(HostShutdown, ALibraryWhoseShutdownNeverReturnsCannotHoldTheHost) {
  HostProcess host(BlockerGroup(Fixture("blocker1"), "a", "shutdown_sleep_ms = 600000\n"),
                   "shutdown_timeout_seconds = 1\n");
  ASSERT_TRUE(host.Start({"csi-proxy-blocker-v1"})) << host.error();
  auto begin = Clock::now();
  EXPECT_EQ(host.Stop(milliseconds(20000)), 1) << host.log();
  EXPECT_LT(Clock::now() - begin, milliseconds(7500)) << host.log();
  EXPECT_NE(host.log().find("still stopping 6000 ms after SIGTERM; exiting now"), std::string::npos) << host.log();
}

TEST(Crash, AHandlerThatCrashesLeavesOneLineNamingTheSignalAndTheGroup) {
#ifdef __SANITIZE_ADDRESS__
  GTEST_SKIP() << "under AddressSanitizer, its own handler reports the crash (the host leaves it in place)";
#endif
  HostOptions options;
  options.launcher = {"/usr/bin/prlimit", "--core=0", "--"};  // no core file left behind
  HostProcess host(BlockerGroup(Fixture("blocker1"), "a"), "", options);
  ASSERT_TRUE(host.Start({"csi-proxy-blocker-v1"})) << host.error();
  v1::EchoResponse resp;
  auto crashed = Call(Dial(host.endpoint("csi-proxy-blocker-v1")), "/v1.Blocker/Crash", Req(""), &resp);
  EXPECT_FALSE(crashed.ok());
  int code = 0;
  for (int i = 0; i < 100 && !host.Exited(&code); ++i) std::this_thread::sleep_for(milliseconds(50));
  EXPECT_EQ(code, 128 + SIGSEGV);
  EXPECT_NE(
      host.log().find("critical fatal signal SIGSEGV (11) in group 'blocker' (/v1.Blocker/Crash); the process ends"),
      std::string::npos)
      << host.log();
}

}  // namespace
}  // namespace csi_proxy::testing

// The system service against a real systemd (a private one, see tests/support/systemd_sandbox.h): what
// GetService reports, and that StartService / StopService really start and stop the unit's processes.
#include <gtest/gtest.h>

#include <thread>

#include "bios_serial_linux.h"
#include "system_service.h"
#include "systemd_linux.h"
#include "systemd_sandbox.h"

namespace csi_proxy::system {
namespace {

using csi_proxy::testing::SystemdSandbox;
using namespace std::chrono_literals;

std::string SleeperUnit(const std::string& description, const std::string& extra_unit = "",
                        const std::string& install = "") {
  return "[Unit]\nDescription=" + description + "\nDefaultDependencies=no\n" + extra_unit +
         "[Service]\nExecStart=/bin/sleep 1000\n" + install;
}

SystemdSandbox::Options SandboxUnits() {
  SystemdSandbox::Options o;
  o.units["sleeper.service"] = SleeperUnit("Sleeper for csi-proxy tests");
  o.units["startstop.service"] = SleeperUnit("Start and stop me");
  o.units["twice.service"] = SleeperUnit("Started twice");
  o.units["together.service"] = SleeperUnit("Started by many at once");
  o.units["enabled.service"] = SleeperUnit("Enabled at boot", "", "[Install]\nWantedBy=sandbox.target\n");
  o.units["disabled.service"] = SleeperUnit("Could be enabled", "", "[Install]\nWantedBy=sandbox.target\n");
  o.units["base.service"] = SleeperUnit("Base service");
  o.units["needs-base.service"] = SleeperUnit("Requires base", "Requires=base.service\nAfter=base.service\n");
  o.units["lonely-base.service"] = SleeperUnit("Base whose dependent is stopped");
  o.units["needs-lonely-base.service"] =
      SleeperUnit("Requires lonely-base", "Requires=lonely-base.service\nAfter=lonely-base.service\n");
  o.units["bound.service"] = SleeperUnit("Bound-to service");
  o.units["binds.service"] = SleeperUnit("BindsTo bound", "BindsTo=bound.service\nAfter=bound.service\n");
  o.units["part.service"] = SleeperUnit("PartOf whole", "PartOf=whole.service\n");
  o.units["whole.service"] = SleeperUnit("Whole service");
  o.units["fails.service"] =
      "[Unit]\nDescription=Fails to start\nDefaultDependencies=no\n[Service]\nType=oneshot\nExecStart=/bin/false\n";
  o.units["never-ready.service"] =
      "[Unit]\nDescription=Never reports ready\nDefaultDependencies=no\n[Service]\nType=notify\n"
      "ExecStart=/bin/sleep 1000\nTimeoutStartSec=infinity\n";
  o.units["worker@.service"] = SleeperUnit("Worker %i");
  o.symlinks["sandbox.target.wants/enabled.service"] = "../enabled.service";
  o.symlinks["masked.service"] = "/dev/null";
  return o;
}

class SystemdServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { sandbox_ = SystemdSandbox::Start(SandboxUnits(), &why_).release(); }
  static void TearDownTestSuite() {
    delete sandbox_;
    sandbox_ = nullptr;
  }
  void SetUp() override {
    if (sandbox_ == nullptr) GTEST_SKIP() << "cannot run a private systemd here: " << why_;
    service_ = std::make_unique<SystemService>(
        std::make_unique<LinuxBiosInfo>(),
        std::make_unique<SystemdServiceManager>(SystemdConnectOptions{.private_socket = sandbox_->private_socket(),
                                                                      .bus_address = "unix:path=/nonexistent"}));
  }

  // What systemctl inside the sandbox says, trimmed: an independent witness.
  static std::string IsActive(const std::string& unit) {
    std::string out = sandbox_->Systemctl({"is-active", unit});
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }
  static std::string MainPid(const std::string& unit) {
    std::string out = sandbox_->Systemctl({"show", "--property=MainPID", "--value", unit});
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }

  static SystemdSandbox* sandbox_;
  static std::string why_;
  std::unique_ptr<SystemService> service_;
};

SystemdSandbox* SystemdServiceTest::sandbox_ = nullptr;
std::string SystemdServiceTest::why_;

TEST_F(SystemdServiceTest, GetServiceReportsDescriptionStartTypeAndStatus) {
  auto info = service_->GetService("sleeper.service");
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_EQ(info->display_name, "Sleeper for csi-proxy tests");
  EXPECT_EQ(info->start_type, StartType::kManual);  // static: no [Install] section
  EXPECT_EQ(info->status, ServiceStatus::kStopped);
}

TEST_F(SystemdServiceTest, GetServiceAppendsTheServiceSuffix) {
  auto info = service_->GetService("sleeper");
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_EQ(info->display_name, "Sleeper for csi-proxy tests");
}

TEST_F(SystemdServiceTest, AnEnabledServiceStartsAutomaticallyAndRuns) {
  auto info = service_->GetService("enabled");
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_EQ(info->start_type, StartType::kAutomatic)
      << sandbox_->Systemctl({"show", "--property=UnitFileState,FragmentPath,ActiveState", "enabled.service"})
      << sandbox_->Systemctl({"is-enabled", "enabled.service"});
  EXPECT_EQ(info->status, ServiceStatus::kRunning);
  EXPECT_FALSE(sandbox_->UnitProcesses("enabled.service").empty());
}

TEST_F(SystemdServiceTest, ADisabledServiceIsManualAndAMaskedOneIsDisabled) {
  auto disabled = service_->GetService("disabled");
  ASSERT_TRUE(disabled.ok()) << disabled.status().message();
  EXPECT_EQ(disabled->start_type, StartType::kManual);
  auto masked = service_->GetService("masked");
  ASSERT_TRUE(masked.ok()) << masked.status().message();
  EXPECT_EQ(masked->start_type, StartType::kDisabled);
  EXPECT_EQ(masked->status, ServiceStatus::kStopped);
}

TEST_F(SystemdServiceTest, GetServiceOfAnUnknownServiceIsNotFound) {
  auto info = service_->GetService("no-such-service");
  EXPECT_EQ(info.status().code(), Code::kNotFound);
  EXPECT_EQ(info.status().message(), "service \"no-such-service.service\" not found");
}

TEST_F(SystemdServiceTest, StartThenStopReallyStartsAndStopsTheProcesses) {
  ASSERT_TRUE(service_->StartService("startstop").ok());
  EXPECT_EQ(service_->GetService("startstop")->status, ServiceStatus::kRunning);
  EXPECT_EQ(IsActive("startstop.service"), "active");
  EXPECT_FALSE(sandbox_->UnitProcesses("startstop.service").empty());

  Status stopped = service_->StopService("startstop", false);
  ASSERT_TRUE(stopped.ok()) << stopped.message();
  EXPECT_EQ(service_->GetService("startstop")->status, ServiceStatus::kStopped);
  EXPECT_EQ(IsActive("startstop.service"), "inactive");
  EXPECT_TRUE(sandbox_->UnitProcesses("startstop.service").empty());
}

TEST_F(SystemdServiceTest, StartingARunningServiceLeavesItAlone) {
  ASSERT_TRUE(service_->StartService("twice").ok());
  std::string pid = MainPid("twice.service");
  ASSERT_NE(pid, "0");
  ASSERT_TRUE(service_->StartService("twice.service").ok());
  EXPECT_EQ(MainPid("twice.service"), pid);
  ASSERT_TRUE(service_->StopService("twice", false).ok());
}

TEST_F(SystemdServiceTest, StoppingAStoppedServiceSucceeds) {
  ASSERT_EQ(IsActive("sleeper.service"), "inactive");
  EXPECT_TRUE(service_->StopService("sleeper", false).ok());
  EXPECT_TRUE(service_->StopService("sleeper", true).ok());
}

TEST_F(SystemdServiceTest, ManyConcurrentStartsOfOneServiceAllSucceedWithOneProcess) {
  std::vector<Status> results(6);
  std::vector<std::thread> threads;
  for (auto& result : results) threads.emplace_back([&] { result = service_->StartService("together"); });
  for (auto& t : threads) t.join();
  for (const auto& result : results) EXPECT_TRUE(result.ok()) << result.message();
  EXPECT_EQ(sandbox_->UnitProcesses("together.service").size(), 1u);
  ASSERT_TRUE(service_->StopService("together", false).ok());
}

TEST_F(SystemdServiceTest, StopWithoutForceRefusesWhileAnActiveUnitRequiresIt) {
  ASSERT_TRUE(service_->StartService("needs-base").ok());
  ASSERT_EQ(IsActive("base.service"), "active");

  Status refused = service_->StopService("base", false);
  EXPECT_EQ(refused.code(), Code::kFailedPrecondition);
  EXPECT_NE(refused.message().find("needs-base.service"), std::string::npos) << refused.message();
  EXPECT_EQ(IsActive("base.service"), "active");
  EXPECT_EQ(IsActive("needs-base.service"), "active");

  Status forced = service_->StopService("base", true);
  ASSERT_TRUE(forced.ok()) << forced.message();
  EXPECT_EQ(IsActive("base.service"), "inactive");
  EXPECT_EQ(IsActive("needs-base.service"), "inactive");  // systemd stopped the dependent with it
}

TEST_F(SystemdServiceTest, StopWithoutForceSucceedsWhenTheDependentsAreStopped) {
  ASSERT_TRUE(service_->StartService("needs-lonely-base").ok());
  ASSERT_TRUE(service_->StopService("needs-lonely-base", false).ok());
  ASSERT_EQ(IsActive("lonely-base.service"), "active");
  Status stopped = service_->StopService("lonely-base", false);
  EXPECT_TRUE(stopped.ok()) << stopped.message();
  EXPECT_EQ(IsActive("lonely-base.service"), "inactive");
}

TEST_F(SystemdServiceTest, BindsToAndPartOfCountAsDependents) {
  ASSERT_TRUE(service_->StartService("binds").ok());
  EXPECT_EQ(service_->StopService("bound", false).code(), Code::kFailedPrecondition);
  ASSERT_TRUE(service_->StartService("whole").ok());
  ASSERT_TRUE(service_->StartService("part").ok());
  EXPECT_EQ(service_->StopService("whole", false).code(), Code::kFailedPrecondition);
  EXPECT_TRUE(service_->StopService("bound", true).ok());
  EXPECT_TRUE(service_->StopService("whole", true).ok());
  EXPECT_EQ(IsActive("binds.service"), "inactive");
  EXPECT_EQ(IsActive("part.service"), "inactive");
}

TEST_F(SystemdServiceTest, AServiceThatFailsToStartIsReportedWithSystemdsReason) {
  Status started = service_->StartService("fails");
  EXPECT_EQ(started.code(), Code::kInternal);
  EXPECT_NE(started.message().find("ActiveState=failed"), std::string::npos) << started.message();
  EXPECT_NE(started.message().find("Result=exit-code"), std::string::npos) << started.message();
  EXPECT_EQ(service_->GetService("fails")->status, ServiceStatus::kStopped);
}

TEST_F(SystemdServiceTest, StartingAMaskedServiceIsAFailedPrecondition) {
  Status started = service_->StartService("masked");
  EXPECT_EQ(started.code(), Code::kFailedPrecondition);
  EXPECT_NE(started.message().find("masked"), std::string::npos) << started.message();
}

TEST_F(SystemdServiceTest, StartGivesUpAtTheCallsDeadlineAndReportsThePendingState) {
  auto begin = std::chrono::steady_clock::now();
  Status started = service_->StartService("never-ready", {.deadline = begin + 600ms});
  auto took = std::chrono::steady_clock::now() - begin;
  EXPECT_EQ(started.code(), Code::kDeadlineExceeded);
  EXPECT_NE(started.message().find("ActiveState=activating"), std::string::npos) << started.message();
  EXPECT_LT(took, 3s);
  EXPECT_EQ(service_->GetService("never-ready")->status, ServiceStatus::kStartPending);
  Status stopped = service_->StopService("never-ready", true);
  EXPECT_TRUE(stopped.ok()) << stopped.message();
  EXPECT_EQ(IsActive("never-ready.service"), "inactive");
}

TEST_F(SystemdServiceTest, AWaitEndsWhenTheCallerGoesAway) {
  Status started = service_->StartService("never-ready", {.cancelled = [] { return true; }});
  EXPECT_EQ(started.code(), Code::kCancelled);
  EXPECT_TRUE(service_->StopService("never-ready", true).ok());
}

TEST_F(SystemdServiceTest, TemplateInstancesCanBeStartedAndStopped) {
  ASSERT_TRUE(service_->StartService("worker@one").ok());
  auto info = service_->GetService("worker@one.service");
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_EQ(info->display_name, "Worker one");
  EXPECT_EQ(info->status, ServiceStatus::kRunning);
  EXPECT_TRUE(service_->StopService("worker@one", false).ok());
  EXPECT_EQ(IsActive("worker@one.service"), "inactive");
}

}  // namespace
}  // namespace csi_proxy::system

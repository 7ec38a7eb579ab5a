// The system group end to end: the real host loads the real group library and serves
// csi-proxy-system-v1alpha1 on its Unix socket; a gRPC client sends the bytes any csi-proxy client sends.
// Service calls go to a private systemd (tests/support/systemd_sandbox.h) or to a socket where none answers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fstream>

#include "grpc_client.h"
#include "host_process.h"
#include "systemd_sandbox.h"
#include "v1alpha1/system.pb.h"

namespace csi_proxy::testing {
namespace {

using namespace std::chrono_literals;

constexpr const char* kEndpoint = "csi-proxy-system-v1alpha1";

std::string GroupToml(const std::string& private_socket, const std::string& extra = "") {
  return "[groups.system]\nrequired = true\nsystemd_private_socket = \"" + private_socket +
         "\"\nsystemd_bus_address = \"unix:path=" + private_socket + ".no-bus\"\n" + extra;
}

v1alpha1::GetServiceRequest GetReq(const std::string& name) {
  v1alpha1::GetServiceRequest r;
  r.set_name(name);
  return r;
}
v1alpha1::StartServiceRequest StartReq(const std::string& name) {
  v1alpha1::StartServiceRequest r;
  r.set_name(name);
  return r;
}
v1alpha1::StopServiceRequest StopReq(const std::string& name, bool force) {
  v1alpha1::StopServiceRequest r;
  r.set_name(name);
  r.set_force(force);
  return r;
}

// --- Without systemd: the answers say so, and bad requests are refused before anything else. ---

class SystemWithoutSystemd : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(host_.Start({kEndpoint})) << host_.error() << host_.log();
    channel_ = Dial(host_.endpoint(kEndpoint));
  }
  // Nothing listens there: the host's temporary directory has no such socket.
  std::string socket_ = "/tmp/csi-proxy-test-no-systemd-" + std::to_string(::getpid()) + "/private";
  HostProcess host_{GroupToml(socket_)};
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(SystemWithoutSystemd, ServiceCallsFailWithSystemdIsNotRunning) {
  v1alpha1::GetServiceResponse resp;
  auto s = Call(channel_, "/v1alpha1.System/GetService", GetReq("ssh"), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(s.error_message().rfind(
                "systemd is not running: cannot connect to unix:path=" + socket_ + ": No such file or directory", 0),
            0u)
      << s.error_message();
  v1alpha1::StartServiceResponse start;
  EXPECT_EQ(Call(channel_, "/v1alpha1.System/StartService", StartReq("e2e-sleeper"), &start).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  v1alpha1::StopServiceResponse stop;
  EXPECT_EQ(Call(channel_, "/v1alpha1.System/StopService", StopReq("e2e-sleeper", true), &stop).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_F(SystemWithoutSystemd, BiosSerialNumberIsWhatTheFirmwareExposesOrAClearRefusal) {
  v1alpha1::GetBIOSSerialNumberResponse resp;
  auto s = Call(channel_, "/v1alpha1.System/GetBIOSSerialNumber", v1alpha1::GetBIOSSerialNumberRequest(), &resp);
  std::ifstream dmi("/sys/class/dmi/id/product_serial");
  if (dmi) {
    std::string line;
    std::getline(dmi, line);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.serial_number(), line);
  } else if (::access("/proc/device-tree/serial-number", F_OK) == 0) {
    EXPECT_TRUE(s.ok()) << s.error_message();
  } else {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_NE(s.error_message().find("no DMI and no device tree"), std::string::npos) << s.error_message();
  }
}

TEST_F(SystemWithoutSystemd, MalformedRequestBytesAreInvalidArgumentAndTheHostKeepsServing) {
  std::string out;
  for (const char* method : {"/v1alpha1.System/GetService", "/v1alpha1.System/StartService",
                             "/v1alpha1.System/StopService", "/v1alpha1.System/GetBIOSSerialNumber"}) {
    // A length-delimited field whose length runs past the end of the message.
    auto s = CallRaw(channel_, method,
                     std::string("\x0a\xff\xff\xff\x0f"
                                 "abc",
                                 8),
                     &out);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << method << ": " << s.error_message();
    // Field 1 (name) sent as a varint instead of a string.
    s = CallRaw(channel_, method, std::string("\x08\x01", 2), &out);
    if (std::string(method) != "/v1alpha1.System/GetBIOSSerialNumber") {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << method << ": " << s.error_message();
    }
  }
  // Still serving, and answering properly.
  v1alpha1::GetServiceResponse resp;
  EXPECT_EQ(Call(channel_, "/v1alpha1.System/GetService", GetReq("ssh"), &resp).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_F(SystemWithoutSystemd, MissingOrInvalidNamesAreInvalidArgument) {
  v1alpha1::GetServiceResponse get;
  auto s = Call(channel_, "/v1alpha1.System/GetService", v1alpha1::GetServiceRequest(), &get);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "service name is empty");
  v1alpha1::StartServiceResponse start;
  EXPECT_EQ(Call(channel_, "/v1alpha1.System/StartService", v1alpha1::StartServiceRequest(), &start).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  v1alpha1::StopServiceResponse stop;
  EXPECT_EQ(Call(channel_, "/v1alpha1.System/StopService", v1alpha1::StopServiceRequest(), &stop).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  for (const char* name : {"reboot.target", "../../etc/shadow", "ssh; reboot", "$(reboot)", "a\nb"}) {
    EXPECT_EQ(Call(channel_, "/v1alpha1.System/StartService", StartReq(name), &start).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT)
        << name;
  }
  // A name that is not UTF-8 (field 1, 5 bytes): refused whether the parser or the name check sees it first.
  std::string out;
  EXPECT_EQ(CallRaw(channel_, "/v1alpha1.System/GetService",
                    std::string("\x0a\x05"
                                "caf\xc3\x28",
                                7),
                    &out)
                .error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST(SystemConfig, ABiosSerialFileFromTheConfigIsReadRaw) {
  TempDir dir;
  std::string file = dir.path() + "/serial";
  std::ofstream(file) << "E2E-SERIAL 42\n";
  HostProcess host(GroupToml(dir.path() + "/none", "bios_serial_files = [\"" + file + "\"]\n"));
  ASSERT_TRUE(host.Start({kEndpoint})) << host.error() << host.log();
  v1alpha1::GetBIOSSerialNumberResponse resp;
  auto s = Call(Dial(host.endpoint(kEndpoint)), "/v1alpha1.System/GetBIOSSerialNumber",
                v1alpha1::GetBIOSSerialNumberRequest(), &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.serial_number(), "E2E-SERIAL 42");
}

TEST(SystemConfig, AnUnknownKeyRefusesTheGroupByName) {
  HostProcess host("[groups.system]\nrequired = true\nsystemd_bus_adress = \"unix:path=/x\"\n");
  EXPECT_FALSE(host.Start({kEndpoint}, 10s));
  EXPECT_NE(host.log().find("unknown key 'systemd_bus_adress' in [groups.system]"), std::string::npos) << host.log();
}

// A red-team pass started systemd-reboot through this API. What can bring the node down or take it out of
// service is refused by name before systemd is asked (here there is no systemd: the answer is not
// FAILED_PRECONDITION "systemd is not running", it is PERMISSION_DENIED).
TEST_F(SystemWithoutSystemd, ServicesThatCanBringTheNodeDownAreRefusedByName) {
  for (const char* name :
       {"systemd-reboot", "systemd-poweroff.service", "systemd-halt", "systemd-kexec", "systemd-soft-reboot",
        "emergency", "rescue", "csi-proxy", "kubelet", "containerd", "crio", "docker", "dbus", "dbus-broker",
        "systemd-journald", "systemd-journald@audit", "systemd-logind", "systemd-udevd"}) {
    v1alpha1::StartServiceResponse start;
    auto s = Call(channel_, "/v1alpha1.System/StartService", StartReq(name), &start);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << name << ": " << s.error_message();
    v1alpha1::StopServiceResponse stop;
    s = Call(channel_, "/v1alpha1.System/StopService", StopReq(name, true), &stop);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << name << ": " << s.error_message();
  }
}

TEST(SystemConfig, AllowedServicesNamingARebootServiceRefusesTheGroup) {
  HostProcess host("[groups.system]\nrequired = true\nallowed_services = [\"systemd-reboot\"]\n");
  EXPECT_FALSE(host.Start({kEndpoint}, 10s));
  EXPECT_NE(host.log().find("can bring the node down"), std::string::npos) << host.log();
}

TEST(SystemConfig, AnInvalidAllowedServiceRefusesTheGroup) {
  HostProcess host("[groups.system]\nrequired = true\nallowed_services = [\"reboot.target\"]\n");
  EXPECT_FALSE(host.Start({kEndpoint}, 10s));
  EXPECT_NE(host.log().find("allowed_services"), std::string::npos) << host.log();
}

// --- With a real (private) systemd. ---

std::string Sleeper(const std::string& description, const std::string& unit_extra = "") {
  return "[Unit]\nDescription=" + description + "\nDefaultDependencies=no\n" + unit_extra +
         "[Service]\nExecStart=/bin/sleep 1000\n";
}

class SystemWithSystemd : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    SystemdSandbox::Options o;
    o.units["e2e-sleeper.service"] = Sleeper("csi-proxy e2e sleeper");
    o.units["e2e-base.service"] = Sleeper("csi-proxy e2e base");
    o.units["e2e-dependent.service"] =
        Sleeper("csi-proxy e2e dependent", "Requires=e2e-base.service\nAfter=e2e-base.service\n");
    // Starting or stopping it would act on the whole (sandboxed) node; it must never be started.
    o.units["e2e-exits-manager.service"] =
        "[Unit]\nDescription=exits the manager\nDefaultDependencies=no\nSuccessAction=exit\nFailureAction=exit\n"
        "[Service]\nType=oneshot\nExecStart=/bin/true\n";
    o.units["kubelet.service"] = Sleeper("stand-in for the kubelet");
    o.symlinks["e2e-kubelet-alias.service"] = "kubelet.service";
    o.units["e2e-never-ready.service"] =
        "[Unit]\nDescription=never ready\nDefaultDependencies=no\n[Service]\nType=notify\n"
        "ExecStart=/bin/sleep 1000\nTimeoutStartSec=infinity\n";
    sandbox_ = SystemdSandbox::Start(o, &why_).release();
  }
  static void TearDownTestSuite() {
    delete sandbox_;
    sandbox_ = nullptr;
  }
  void SetUp() override {
    if (sandbox_ == nullptr) GTEST_SKIP() << "cannot run a private systemd here: " << why_;
    host_ = std::make_unique<HostProcess>(GroupToml(sandbox_->private_socket(), extra_config_));
    ASSERT_TRUE(host_->Start({kEndpoint})) << host_->error() << host_->log();
    channel_ = Dial(host_->endpoint(kEndpoint));
  }

  grpc::Status Get(const std::string& name, v1alpha1::GetServiceResponse* resp) {
    return Call(channel_, "/v1alpha1.System/GetService", GetReq(name), resp);
  }
  grpc::Status Start(const std::string& name, std::chrono::milliseconds timeout = 60s) {
    v1alpha1::StartServiceResponse resp;
    return Call(channel_, "/v1alpha1.System/StartService", StartReq(name), &resp, timeout);
  }
  grpc::Status Stop(const std::string& name, bool force) {
    v1alpha1::StopServiceResponse resp;
    return Call(channel_, "/v1alpha1.System/StopService", StopReq(name, force), &resp);
  }
  static std::string IsActive(const std::string& unit) {
    std::string out = sandbox_->Systemctl({"is-active", unit});
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }

  static SystemdSandbox* sandbox_;
  static std::string why_;
  std::string extra_config_;
  std::unique_ptr<HostProcess> host_;
  std::shared_ptr<grpc::Channel> channel_;
};

SystemdSandbox* SystemWithSystemd::sandbox_ = nullptr;
std::string SystemWithSystemd::why_;

TEST_F(SystemWithSystemd, GetStartGetStopGetFollowsTheRealService) {
  v1alpha1::GetServiceResponse info;
  ASSERT_TRUE(Get("e2e-sleeper", &info).ok());
  EXPECT_EQ(info.display_name(), "csi-proxy e2e sleeper");
  EXPECT_EQ(info.start_type(), v1alpha1::MANUAL);
  EXPECT_EQ(info.status(), v1alpha1::STOPPED);

  auto started = Start("e2e-sleeper");
  ASSERT_TRUE(started.ok()) << started.error_message();
  ASSERT_TRUE(Get("e2e-sleeper.service", &info).ok());
  EXPECT_EQ(info.status(), v1alpha1::RUNNING);
  EXPECT_EQ(IsActive("e2e-sleeper.service"), "active");
  EXPECT_EQ(sandbox_->UnitProcesses("e2e-sleeper.service").size(), 1u);
  EXPECT_TRUE(Start("e2e-sleeper").ok());  // again: nothing to do

  auto stopped = Stop("e2e-sleeper", false);
  ASSERT_TRUE(stopped.ok()) << stopped.error_message();
  ASSERT_TRUE(Get("e2e-sleeper", &info).ok());
  EXPECT_EQ(info.status(), v1alpha1::STOPPED);
  EXPECT_EQ(IsActive("e2e-sleeper.service"), "inactive");
  EXPECT_TRUE(sandbox_->UnitProcesses("e2e-sleeper.service").empty());
  EXPECT_TRUE(Stop("e2e-sleeper", false).ok());  // again: nothing to do
}

TEST_F(SystemWithSystemd, AnActiveDependentBlocksStopUnlessForced) {
  ASSERT_TRUE(Start("e2e-dependent").ok());
  ASSERT_EQ(IsActive("e2e-base.service"), "active");

  auto refused = Stop("e2e-base", false);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(refused.error_message().find("e2e-dependent.service"), std::string::npos) << refused.error_message();
  EXPECT_EQ(IsActive("e2e-base.service"), "active");

  auto forced = Stop("e2e-base", true);
  ASSERT_TRUE(forced.ok()) << forced.error_message();
  EXPECT_EQ(IsActive("e2e-base.service"), "inactive");
  EXPECT_EQ(IsActive("e2e-dependent.service"), "inactive");
}

TEST_F(SystemWithSystemd, UnknownServiceIsNotFound) {
  v1alpha1::GetServiceResponse info;
  auto s = Get("e2e-no-such-service", &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message(), "service \"e2e-no-such-service.service\" not found");
}

TEST_F(SystemWithSystemd, TheServerStopsWaitingWhenTheClientsDeadlinePasses) {
  auto begin = std::chrono::steady_clock::now();
  auto s = Start("e2e-never-ready", 1s);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  // The handler honoured the deadline and let go of the unit: a stop of the same unit (which waits for the
  // per-service lock) completes long before the group's 30 s limit.
  auto stopped = Stop("e2e-never-ready", true);
  EXPECT_TRUE(stopped.ok()) << stopped.error_message();
  EXPECT_LT(std::chrono::steady_clock::now() - begin, 10s);
  EXPECT_EQ(IsActive("e2e-never-ready.service"), "inactive");
}

class SystemWithAllowList : public SystemWithSystemd {
 protected:
  SystemWithAllowList() { extra_config_ = "allowed_services = [\"e2e-base\"]\n"; }
};

TEST_F(SystemWithAllowList, OnlyAllowedServicesMayBeStartedOrStopped) {
  auto s = Start("e2e-sleeper");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(s.error_message(), "service e2e-sleeper.service is not in this node's allowed_services");
  EXPECT_EQ(Stop("e2e-sleeper", true).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(IsActive("e2e-sleeper.service"), "inactive");
  v1alpha1::GetServiceResponse info;
  EXPECT_TRUE(Get("e2e-sleeper", &info).ok());  // reading is not restricted
  EXPECT_TRUE(Start("e2e-base").ok());
  EXPECT_TRUE(Stop("e2e-base.service", false).ok());
}

// What systemd says about a unit counts too: a unit declaring a node-wide action (SuccessAction=, FailureAction=,
// ...) and an alias of a refused unit are refused; an allow-list entry opens a kubelet-class unit.
TEST_F(SystemWithSystemd, UnitsWithNodeActionsAndAliasesOfRefusedUnitsAreRefused) {
  auto s = Start("e2e-exits-manager");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_NE(s.error_message().find("SuccessAction=exit"), std::string::npos) << s.error_message();
  EXPECT_EQ(Stop("e2e-exits-manager", true).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  s = Start("e2e-kubelet-alias");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_EQ(IsActive("kubelet.service"), "inactive");
  EXPECT_TRUE(Start("e2e-sleeper").ok());  // the manager is still there
  EXPECT_TRUE(Stop("e2e-sleeper", false).ok());
}

class SystemAllowingKubelet : public SystemWithSystemd {
 protected:
  SystemAllowingKubelet() { extra_config_ = "allowed_services = [\"kubelet\", \"e2e-kubelet-alias\"]\n"; }
};

TEST_F(SystemAllowingKubelet, AnAllowListEntryOpensAKubeletClassUnit) {
  auto s = Start("e2e-kubelet-alias");
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(IsActive("kubelet.service"), "active");
  s = Stop("kubelet", false);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(IsActive("kubelet.service"), "inactive");
}

}  // namespace
}  // namespace csi_proxy::testing

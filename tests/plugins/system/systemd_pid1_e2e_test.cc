// The system group against the machine's own systemd, booted as PID 1: the real host serves
// csi-proxy-system-v1alpha1 with its default connection (/run/systemd/private), and GetService, StartService and
// StopService act on a real test unit, while the allow-list refuses every other service. It installs a unit in
// /run/systemd/system, so it runs only in the VM lane's guest (tests/vm) and skips elsewhere.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "grpc_client.h"
#include "host_process.h"
#include "run_program.h"
#include "v1alpha1/system.pb.h"
#include "vm_guest.h"

namespace csi_proxy::testing {
namespace {

namespace fs = std::filesystem;
constexpr const char* kEndpoint = "csi-proxy-system-v1alpha1";
constexpr const char* kUnitDir = "/run/systemd/system";

std::string Systemctl(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/bin/systemctl"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto result = common::RunProgram(argv);
  return result.ok() ? result->output : result.status().message();
}

class SystemdAsPid1 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = WhyNotInVmGuest(); !why.empty()) GTEST_SKIP() << why;
    for (const char* unit : {"csi-vm-allowed", "csi-vm-refused"}) {
      std::ofstream(std::string(kUnitDir) + "/" + unit + ".service")
          << "[Unit]\nDescription=csi-proxy VM lane test unit " << unit
          << "\n[Service]\nExecStart=/bin/sleep infinity\n";
    }
    // No daemon-reload: systemd loads a unit it never saw from disk when it is first asked for (a reload of the
    // whole installed unit set takes half a minute under emulation).
    host_ = std::make_unique<HostProcess>(
        "[groups.system]\nrequired = true\nallowed_services = [\"csi-vm-allowed\"]\nservice_timeout_seconds = 60\n");
    ASSERT_TRUE(host_->Start({kEndpoint})) << host_->error() << host_->log();
    channel_ = Dial(host_->endpoint(kEndpoint));
  }
  void TearDown() override {
    if (!WhyNotInVmGuest().empty()) return;
    host_.reset();
    Systemctl({"stop", "csi-vm-allowed.service", "csi-vm-refused.service"});
    for (const char* unit : {"csi-vm-allowed", "csi-vm-refused"}) {
      fs::remove(std::string(kUnitDir) + "/" + unit + ".service");
    }
  }

  v1alpha1::ServiceStatus StatusOf(const std::string& name) {
    v1alpha1::GetServiceRequest req;
    req.set_name(name);
    v1alpha1::GetServiceResponse resp;
    auto s = Call(channel_, "/v1alpha1.System/GetService", req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.status();
  }
  grpc::Status Start(const std::string& name) {
    v1alpha1::StartServiceRequest req;
    req.set_name(name);
    v1alpha1::StartServiceResponse resp;
    return Call(channel_, "/v1alpha1.System/StartService", req, &resp);
  }
  grpc::Status Stop(const std::string& name) {
    v1alpha1::StopServiceRequest req;
    req.set_name(name);
    v1alpha1::StopServiceResponse resp;
    return Call(channel_, "/v1alpha1.System/StopService", req, &resp);
  }

  std::unique_ptr<HostProcess> host_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(SystemdAsPid1, GetStartStopDriveARealUnit) {
  v1alpha1::GetServiceRequest req;
  req.set_name("csi-vm-allowed");
  v1alpha1::GetServiceResponse resp;
  ASSERT_TRUE(Call(channel_, "/v1alpha1.System/GetService", req, &resp).ok());
  EXPECT_EQ(resp.display_name(), "csi-proxy VM lane test unit csi-vm-allowed");
  EXPECT_EQ(resp.status(), v1alpha1::STOPPED);

  auto s = Start("csi-vm-allowed");
  ASSERT_TRUE(s.ok()) << s.error_message() << host_->log();
  EXPECT_EQ(StatusOf("csi-vm-allowed"), v1alpha1::RUNNING);
  EXPECT_EQ(Systemctl({"is-active", "csi-vm-allowed.service"}), "active\n");
  EXPECT_TRUE(Start("csi-vm-allowed").ok()) << "starting a running service is success";

  s = Stop("csi-vm-allowed");
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(StatusOf("csi-vm-allowed"), v1alpha1::STOPPED);
  EXPECT_EQ(Systemctl({"is-active", "csi-vm-allowed.service"}), "inactive\n");
  EXPECT_TRUE(Stop("csi-vm-allowed").ok()) << "stopping a stopped service is success";
}

TEST_F(SystemdAsPid1, TheAllowListRefusesEveryOtherService) {
  EXPECT_EQ(Start("csi-vm-refused").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Stop("csi-vm-refused").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Start("systemd-journald").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Systemctl({"is-active", "csi-vm-refused.service"}), "inactive\n");
  EXPECT_EQ(StatusOf("csi-vm-refused"), v1alpha1::STOPPED) << "GetService is not restricted";
}

}  // namespace
}  // namespace csi_proxy::testing

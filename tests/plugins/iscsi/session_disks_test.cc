// GetTargetDisks on a fabricated sysfs (this machine's kernel has no iSCSI or SCSI): the session of the target
// through the portal is found in /sys/class/iscsi_session and /sys/class/iscsi_connection, and its disks are
// reported with the disk group's numbers (diskseq).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "fake_sysfs.h"
#include "iscsi_backend_linux.h"
#include "iscsi_service.h"
#include "temp_dir.h"

namespace csi_proxy::iscsi {
namespace {

namespace fs = std::filesystem;

constexpr const char* kIqn = "iqn.2024-01.io.example:target0";

void Write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

// An iSCSI session (session3 on host7) to kIqn through 127.0.0.1:3260 holding the fake SCSI disk 7:0:3:1, laid
// out as the kernel does: /sys/class/iscsi_session/session3/device is the session's device, whose target and
// LUN directories hold the disk.
class FakeIscsiSession {
 public:
  FakeIscsiSession() : disk_("sdb", "7:0:3:1", 4242, "", "") {
    const std::string sys = disk_.roots().sys;
    Write(sys + "/class/iscsi_session/session3/targetname", std::string(kIqn) + "\n");
    fs::create_symlink(sys + "/devices/platform/host7", sys + "/class/iscsi_session/session3/device");
    Write(sys + "/class/iscsi_connection/connection3:0/persistent_address", "127.0.0.1\n");
    Write(sys + "/class/iscsi_connection/connection3:0/persistent_port", "3260\n");
  }
  const common::BlockDeviceRoots& roots() const { return disk_.roots(); }

 private:
  testing::FakeScsiDisk disk_;
};

class SessionDisksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    state_ = dir_.path();
    LinuxIscsiOptions options;
    options.state_dir = state_;
    options.initiator_name = "iqn.2024-01.io.k8s.csi-proxy.test:initiator";
    options.sys_root = session_.roots().sys;
    options.dev_root = session_.roots().dev;
    auto backend = MakeLinuxIscsiBackend(options);
    ASSERT_TRUE(backend.ok()) << backend.status().message();
    service_ = std::make_unique<IscsiService>(std::move(*backend), nullptr);
  }

  FakeIscsiSession session_;
  testing::TempDir dir_;
  std::string state_;
  std::unique_ptr<IscsiService> service_;
};

TEST_F(SessionDisksTest, TheSessionsDiskIsReportedWithItsDiskNumber) {
  auto disks = service_->GetTargetDisks(PortalRequest{"127.0.0.1", 3260}, kIqn);
  ASSERT_TRUE(disks.ok()) << disks.status().message();
  EXPECT_EQ(*disks, std::vector<std::string>{"4242"});
}

TEST_F(SessionDisksTest, PortZeroFindsTheSessionOnPort3260) {
  auto disks = service_->GetTargetDisks(PortalRequest{"127.0.0.1", 0}, kIqn);
  ASSERT_TRUE(disks.ok()) << disks.status().message();
  EXPECT_EQ(*disks, std::vector<std::string>{"4242"});
}

TEST_F(SessionDisksTest, AnotherTargetOrPortalHasNoDisks) {
  auto other_iqn = service_->GetTargetDisks(PortalRequest{"127.0.0.1", 3260}, "iqn.2024-01.io.example:other");
  ASSERT_TRUE(other_iqn.ok());
  EXPECT_TRUE(other_iqn->empty());
  auto other_port = service_->GetTargetDisks(PortalRequest{"127.0.0.1", 3261}, kIqn);
  ASSERT_TRUE(other_port.ok());
  EXPECT_TRUE(other_port->empty());
  auto other_address = service_->GetTargetDisks(PortalRequest{"127.0.0.2", 3260}, kIqn);
  ASSERT_TRUE(other_address.ok());
  EXPECT_TRUE(other_address->empty());
}

}  // namespace
}  // namespace csi_proxy::iscsi

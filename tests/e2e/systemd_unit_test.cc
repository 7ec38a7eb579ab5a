// The shipped systemd unit (deploy/csi-proxy.service.in) under a real systemd as PID 1: installed by
// `cmake --install` to /opt/csi-proxy (which writes the unit with those paths into lib/systemd/system) and copied to
// /etc/systemd/system, it starts and is ready (Type=notify: `systemctl start` returns once the host sent READY=1,
// which it does only when every socket of the default configuration serves), reloads in place (ExecReload: SIGHUP,
// same process, sockets kept, RELOADING=1 then READY=1), keeps its socket directory across a restart and across stop
// and start (RuntimeDirectoryPreserve=yes: driver pods mount it) and stops cleanly. It installs into the machine, so it
// runs only in the VM lane's guest (tests/vm) and skips elsewhere.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "build_tree.h"
#include "host_process.h"
#include "run_program.h"
#include "vm_guest.h"

namespace csi_proxy::testing {
namespace {

namespace fs = std::filesystem;
constexpr const char* kUnit = "/etc/systemd/system/csi-proxy.service";
constexpr const char* kPrefix = "/opt/csi-proxy";
constexpr const char* kRuntimeDir = "/run/csi-proxy";

common::ProgramResult RunArgv(const std::vector<std::string>& argv) {
  common::ProgramOptions options;
  options.timeout = std::chrono::seconds(120);
  auto result = common::RunProgram(argv, options);
  if (!result.ok()) return common::ProgramResult{-1, 0, result.status().message()};
  return *result;
}
std::string Systemctl(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/bin/systemctl"};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunArgv(argv).output;
}
std::string Show(const std::string& property) { return Systemctl({"show", "-p", property, "--value", "csi-proxy"}); }

const std::vector<std::string> kEndpoints = {"csi-proxy-filesystem-v1",  "csi-proxy-disk-v1",
                                             "csi-proxy-volume-v1",      "csi-proxy-smb-v1",
                                             "csi-proxy-iscsi-v1alpha2", "csi-proxy-system-v1alpha1"};

// Waits (bounded) until the unit is active again after a reload.
bool BackToActive() {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    if (Show("ActiveState") == "active\n") return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return false;
}

// Waits (bounded) until every default endpoint accepts connections.
bool AllSocketsServed() {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    bool all = true;
    for (const auto& n : kEndpoints) all = all && SocketAccepts(std::string(kRuntimeDir) + "/" + n);
    if (all) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return false;
}

class ShippedUnit : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = WhyNotInVmGuest(); !why.empty()) GTEST_SKIP() << why;
    auto installed = RunArgv({"/usr/bin/cmake", "--install", csi_proxy::testing::BuildDir(), "--prefix", kPrefix});
    ASSERT_EQ(installed.exit_code, 0) << installed.output;
    fs::create_directories("/var/lib/kubelet");
    fs::copy_file(std::string(kPrefix) + "/lib/systemd/system/csi-proxy.service", kUnit,
                  fs::copy_options::overwrite_existing);
    // No daemon-reload: systemd loads the unit from disk when first asked for it (a reload of the whole installed
    // unit set takes half a minute under emulation).
  }
  void TearDown() override {
    if (!WhyNotInVmGuest().empty()) return;
    Systemctl({"stop", "csi-proxy"});
    fs::remove(kUnit);
    std::error_code ec;
    fs::remove_all(kPrefix, ec);
  }
};

TEST_F(ShippedUnit, StartsServesReloadsKeepsItsSocketDirectoryAcrossRestartsAndStops) {
  auto started = RunArgv({"/bin/systemctl", "start", "csi-proxy"});
  ASSERT_EQ(started.exit_code, 0) << started.output << Systemctl({"status", "csi-proxy"});
  EXPECT_EQ(Show("Type"), "notify\n");
  EXPECT_EQ(Show("ActiveState"), "active\n");
  EXPECT_EQ(Show("SubState"), "running\n");
  EXPECT_EQ(Show("StatusText").rfind("serving ", 0), 0u) << Show("StatusText");  // STATUS= with READY=1
  // Type=notify: the start returned after READY=1, which the host sends once every endpoint serves; so every
  // socket accepts now, without waiting.
  for (const auto& n : kEndpoints) {
    EXPECT_TRUE(SocketAccepts(std::string(kRuntimeDir) + "/" + n)) << n << " not served when the start returned";
  }
  ASSERT_TRUE(AllSocketsServed()) << Systemctl({"status", "-n", "50", "csi-proxy"});
  struct stat dir {};
  ASSERT_EQ(stat(kRuntimeDir, &dir), 0);
  EXPECT_EQ(dir.st_mode & 07777, 0755u) << "RuntimeDirectoryMode's default";

  // ExecReload: SIGHUP to the same process, which re-reads its configuration and keeps its sockets.
  const std::string pid_before = Show("MainPID");
  struct stat socket_before {};
  ASSERT_EQ(stat((std::string(kRuntimeDir) + "/csi-proxy-filesystem-v1").c_str(), &socket_before), 0);
  EXPECT_EQ(Show("CanReload"), "yes\n");
  auto reloaded = RunArgv({"/bin/systemctl", "reload", "csi-proxy"});
  EXPECT_EQ(reloaded.exit_code, 0) << reloaded.output;
  // The host reports RELOADING=1 (ActiveState reloading) and READY=1 when the reload is done.
  EXPECT_TRUE(BackToActive()) << Show("ActiveState");
  EXPECT_EQ(Show("MainPID"), pid_before);
  EXPECT_TRUE(AllSocketsServed());
  struct stat socket_after {};
  ASSERT_EQ(stat((std::string(kRuntimeDir) + "/csi-proxy-filesystem-v1").c_str(), &socket_after), 0);
  EXPECT_EQ(socket_after.st_ino, socket_before.st_ino) << "a reload of an unchanged configuration touches no socket";

  // A restart keeps the directory: what lives beside the sockets survives.
  const std::string marker = std::string(kRuntimeDir) + "/kept-across-restart";
  {
    FILE* f = fopen(marker.c_str(), "w");
    ASSERT_NE(f, nullptr);
    fclose(f);
  }
  auto restarted = RunArgv({"/bin/systemctl", "restart", "csi-proxy"});
  ASSERT_EQ(restarted.exit_code, 0) << restarted.output;
  EXPECT_NE(Show("MainPID"), pid_before);
  EXPECT_TRUE(SocketAccepts(std::string(kRuntimeDir) + "/csi-proxy-filesystem-v1")) << "restart returned before READY";
  EXPECT_TRUE(fs::exists(marker)) << "the runtime directory was recreated by the restart";
  struct stat after {};
  ASSERT_EQ(stat(kRuntimeDir, &after), 0);
  EXPECT_EQ(after.st_ino, dir.st_ino);
  EXPECT_TRUE(AllSocketsServed()) << Systemctl({"status", "-n", "50", "csi-proxy"});

  // SIGTERM: calls finish, the host removes its sockets, exit 0; the directory itself stays for the pods that
  // mounted it, and is the same directory after the next start.
  auto stopped = RunArgv({"/bin/systemctl", "stop", "csi-proxy"});
  ASSERT_EQ(stopped.exit_code, 0) << stopped.output;
  EXPECT_EQ(Show("ActiveState"), "inactive\n");
  EXPECT_EQ(Show("ExecMainStatus"), "0\n");
  EXPECT_EQ(Show("Result"), "success\n");
  ASSERT_TRUE(fs::exists(kRuntimeDir));
  for (const auto& entry : fs::directory_iterator(kRuntimeDir)) {
    EXPECT_NE(entry.path().filename().string().rfind("csi-proxy-", 0), 0u) << "left behind: " << entry.path();
  }
  ASSERT_EQ(RunArgv({"/bin/systemctl", "start", "csi-proxy"}).exit_code, 0);
  ASSERT_EQ(stat(kRuntimeDir, &after), 0);
  EXPECT_EQ(after.st_ino, dir.st_ino);
  EXPECT_TRUE(AllSocketsServed());
  ASSERT_EQ(RunArgv({"/bin/systemctl", "stop", "csi-proxy"}).exit_code, 0);
  fs::remove(marker);
}

}  // namespace
}  // namespace csi_proxy::testing

// Without a reachable systemd every service call says so plainly (FAILED_PRECONDITION), and invalid names are
// refused before the bus is touched. These run against real sockets: missing, stale, and owned by a non-root
// process.
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "bios_serial_linux.h"
#include "system_service.h"
#include "systemd_linux.h"
#include "temp_dir.h"

namespace csi_proxy::system {
namespace {

using testing::TempDir;

SystemdConnectOptions Unreachable(const TempDir& dir) {
  return {.private_socket = dir.path() + "/private", .bus_address = "unix:path=" + dir.path() + "/bus"};
}

// Binds a Unix socket at `path` and listens on it as another user, until destroyed.
class ForeignListener {
 public:
  ForeignListener(const std::string& path, uid_t uid) {
    int ready[2];
    if (::pipe(ready) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(ready[0]);
      if (::setresgid(uid, uid, uid) != 0 || ::setresuid(uid, uid, uid) != 0) _exit(1);
      int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
      sockaddr_un addr = {};
      addr.sun_family = AF_UNIX;
      std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
      if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 8) != 0) _exit(2);
      if (::write(ready[1], "r", 1) != 1) _exit(3);
      while (true) ::pause();
    }
    ::close(ready[1]);
    char c = 0;
    ok_ = ::read(ready[0], &c, 1) == 1;
    ::close(ready[0]);
  }
  ~ForeignListener() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  bool ok() const { return ok_; }

 private:
  pid_t pid_ = -1;
  bool ok_ = false;
};

TEST(SystemdUnreachable, NoSocketMeansSystemdIsNotRunning) {
  TempDir dir;
  SystemdServiceManager manager(Unreachable(dir));
  auto info = manager.Query("ssh.service");
  EXPECT_EQ(info.status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(info.status().message(), "systemd is not running: cannot connect to unix:path=" + dir.path() +
                                         "/private: No such file or directory; unix:path=" + dir.path() +
                                         "/bus: No such file or directory");
}

TEST(SystemdUnreachable, AStaleSocketFileIsReportedAsRefused) {
  TempDir dir;
  {
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr = {};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s/private", dir.path().c_str());
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ::close(fd);  // the file stays, nobody listens: what a crashed systemd leaves behind
  }
  SystemdServiceManager manager(Unreachable(dir));
  auto info = manager.Query("ssh.service");
  EXPECT_EQ(info.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(info.status().message().find("/private: Connection refused"), std::string::npos) << info.status().message();
}

TEST(SystemdUnreachable, APrivateSocketNotOwnedByRootIsNotTrusted) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to listen as another user";
  TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0777), 0);
  ForeignListener impostor(dir.path() + "/private", 65534);
  ASSERT_TRUE(impostor.ok());
  SystemdServiceManager manager(Unreachable(dir));
  auto info = manager.Query("ssh.service");
  EXPECT_EQ(info.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(info.status().message().find("/private: the peer is not root (uid 65534)"), std::string::npos)
      << info.status().message();
}

TEST(SystemdUnreachable, TheDefaultsOnAMachineWithoutSystemdSayItIsNotRunning) {
  if (::access("/run/systemd/private", F_OK) == 0) GTEST_SKIP() << "systemd runs on this machine";
  if (::access("/run/dbus/system_bus_socket", F_OK) == 0) GTEST_SKIP() << "a system bus runs on this machine";
  SystemdServiceManager manager({});
  auto info = manager.Query("ssh.service");
  EXPECT_EQ(info.status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(info.status().message().rfind("systemd is not running: cannot connect to "
                                          "unix:path=/run/systemd/private: No such file or directory; the system bus",
                                          0),
            0u)
      << info.status().message();
}

TEST(SystemdUnreachable, EveryServiceCallOfTheServiceLayerFailsTheSameWay) {
  TempDir dir;
  SystemService service(std::make_unique<LinuxBiosInfo>(), std::make_unique<SystemdServiceManager>(Unreachable(dir)));
  EXPECT_EQ(service.GetService("ssh").status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(service.StartService("iscsi-helper").code(), Code::kFailedPrecondition);
  EXPECT_EQ(service.StopService("iscsi-helper", false).code(), Code::kFailedPrecondition);
  EXPECT_EQ(service.StopService("iscsi-helper", true).code(), Code::kFailedPrecondition);
}

TEST(SystemdUnreachable, InvalidNamesAreRefusedBeforeTheBusIsTouched) {
  TempDir dir;
  SystemService service(std::make_unique<LinuxBiosInfo>(), std::make_unique<SystemdServiceManager>(Unreachable(dir)));
  EXPECT_EQ(service.GetService("../ssh").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(service.StartService("reboot.target").code(), Code::kInvalidArgument);
  EXPECT_EQ(service.StopService("", true).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace csi_proxy::system

// A private systemd for tests: systemd runs as PID 1 of its own PID, mount, cgroup, UTS and IPC namespaces,
// with only the units a test writes, and its private D-Bus socket reachable from the test at
// private_socket(). Nothing of the host's unit set is loaded or started, and nothing outside the sandbox is
// changed: its mounts exist only inside its namespace, its cgroup is a child of the test's own, and the
// destructor kills it and removes its cgroup and its temporary directory, also when the test fails.
//
// Self-contained: needs root, cgroup2 mounted somewhere, /lib/systemd/systemd (+ systemd-socket-proxyd) and
// libsystemd (sd-bus).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "temp_dir.h"

namespace csi_proxy::testing {

class SystemdSandbox {
 public:
  struct Options {
    // Unit files by file name ("sleeper.service" -> its text), written before systemd starts. The sandbox adds
    // its own start target, "sandbox.target", and the csi-sandbox-relay.{socket,service} units.
    std::map<std::string, std::string> units;
    // Symlinks in the unit directory, name -> target: "masked.service" -> "/dev/null" masks a unit,
    // "sandbox.target.wants/x.service" -> "../x.service" enables x (it starts at boot and reads as enabled).
    std::map<std::string, std::string> symlinks;
    std::chrono::milliseconds boot_timeout{std::chrono::seconds(20)};
  };

  // Starts systemd and waits until it has finished booting. On failure returns nullptr and puts the reason in
  // `why` (what is missing, or the exact error and systemd's console output), so a test can skip with it.
  static std::unique_ptr<SystemdSandbox> Start(const Options& options, std::string* why);

  ~SystemdSandbox();
  SystemdSandbox(const SystemdSandbox&) = delete;
  SystemdSandbox& operator=(const SystemdSandbox&) = delete;

  // Where a client outside the sandbox reaches systemd's private socket: a relay inside the sandbox's PID
  // namespace, because systemd refuses private-socket peers from other PID namespaces. E.g.
  // /tmp/csi-systemd-sandbox-XXXXXX/run-systemd/private-relay.
  std::string private_socket() const { return dir_ + "/run-systemd/private-relay"; }
  // The directory the units live in; inside the sandbox it is /etc/systemd/system.
  std::string unit_dir() const { return dir_ + "/units"; }
  // The host path of the sandbox's root cgroup; a unit's processes are in <cgroup_dir()>/system.slice/<unit>.
  const std::string& cgroup_dir() const { return cgroup_dir_; }
  // The PIDs (host view) in a unit's cgroup: empty when nothing of the unit runs.
  std::vector<pid_t> UnitProcesses(const std::string& unit) const;
  // Runs `systemctl <args>` inside the sandbox, as an independent witness of the state; returns its output
  // (stdout and stderr). `exit_code` receives the exit status.
  std::string Systemctl(const std::vector<std::string>& args, int* exit_code = nullptr) const;
  // What systemd wrote to its console (the sandbox's /dev/console), for failure messages.
  std::string ConsoleLog() const;

 private:
  SystemdSandbox() = default;
  void Stop();

  std::unique_ptr<testing::TempDir> temp_;  // holds dir_
  std::string dir_;                         // the temporary directory (units, run-systemd, console log)
  std::string cgroup_dir_;                  // the cgroup created for the sandbox
  pid_t helper_pid_ = -1;                   // our child: it entered the namespaces and waits for PID 1
  pid_t init_pid_ = -1;                     // systemd, PID 1 inside, seen from here
  int init_pidfd_ = -1;                     // a pidfd for init_pid_, so a kill can never hit a recycled PID
};

}  // namespace csi_proxy::testing

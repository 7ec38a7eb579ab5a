// A private systemd for tests; see systemd_sandbox.h.
#include "systemd_sandbox.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "run_program.h"

namespace csi_proxy::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr const char* kSystemd = "/lib/systemd/systemd";
constexpr const char* kSocketProxyd = "/lib/systemd/systemd-socket-proxyd";
constexpr const char* kSandboxTarget =
    "[Unit]\nDescription=csi-proxy test sandbox\nDefaultDependencies=no\nAllowIsolate=yes\n";

// systemd refuses private-socket peers whose PID it cannot see (its peer check wants a valid SO_PEERCRED pid,
// and a process outside its PID namespace shows up as pid 0). So a relay inside the namespace, started by
// systemd itself through socket activation, listens at /run/systemd/private-relay and forwards to the private
// socket. Only bytes pass through: the client still speaks D-Bus to systemd.
constexpr const char* kRelaySocket =
    "[Unit]\nDescription=Relay to the private socket for clients outside the sandbox\nDefaultDependencies=no\n"
    "[Socket]\nListenStream=/run/systemd/private-relay\nSocketMode=0600\n";
constexpr const char* kRelayService =
    "[Unit]\nDescription=Relay to the private socket\nDefaultDependencies=no\n"
    "[Service]\nExecStart=/lib/systemd/systemd-socket-proxyd /run/systemd/private\n";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The cgroup2 directory this process is in, seen through a cgroup2 mount; "" when cgroup2 is not mounted.
std::string OwnCgroup2Dir() {
  std::string own;
  {
    std::ifstream in("/proc/self/cgroup");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("0::", 0) == 0) own = line.substr(3);
    }
  }
  if (own.empty()) return "";
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, devno, root, mountpoint, token;
    fields >> id >> parent >> devno >> root >> mountpoint;
    while (fields >> token && token != "-") {
    }
    std::string fstype;
    fields >> fstype;
    if (fstype != "cgroup2") continue;
    if (root == "/") return mountpoint + (own == "/" ? "" : own);
    if (own.rfind(root, 0) == 0) return mountpoint + own.substr(root.size());
  }
  return "";
}

// Removes a cgroup subtree bottom-up. Directories of a dead cgroup may stay busy for a moment.
void RemoveCgroupTree(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return;
  std::vector<fs::path> dirs;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_directory(ec)) dirs.push_back(it->path());
  }
  std::sort(dirs.begin(), dirs.end(),
            [](const fs::path& a, const fs::path& b) { return a.string().size() > b.string().size(); });
  dirs.push_back(dir);
  for (const fs::path& d : dirs) {
    for (int attempt = 0; attempt < 100 && ::rmdir(d.c_str()) != 0 && errno == EBUSY; ++attempt) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

// Async-signal-safe error report from the forked children: "<step>: errno <n>".
void ReportAndExit(int fd, const char* step) {
  int err = errno;
  char buf[160];
  size_t n = 0;
  for (const char* p = step; *p && n < 100; ++p) buf[n++] = *p;
  const char* mid = ": errno ";
  for (const char* p = mid; *p; ++p) buf[n++] = *p;
  char digits[12];
  int d = 0;
  do {
    digits[d++] = static_cast<char>('0' + err % 10);
    err /= 10;
  } while (err > 0 && d < 11);
  while (d > 0) buf[n++] = digits[--d];
  ssize_t ignored = ::write(fd, buf, n);
  (void)ignored;
  _exit(127);
}

std::string DecodeChildError(const std::string& raw) {
  // "<step>: errno <n>" -> "<step>: <strerror(n)>"
  size_t pos = raw.rfind(": errno ");
  if (pos == std::string::npos) return raw;
  int err = std::atoi(raw.c_str() + pos + 8);
  return raw.substr(0, pos) + ": " + std::strerror(err);
}

// The Manager's SystemState over the private socket, or "" when it does not answer (yet).
std::string SystemState(const std::string& socket) {
  sd_bus* bus = nullptr;
  if (sd_bus_new(&bus) < 0) return "";
  std::string address = "unix:path=" + socket;
  std::string state;
  if (sd_bus_set_address(bus, address.c_str()) >= 0 && sd_bus_start(bus) >= 0) {
    sd_bus_error error = SD_BUS_ERROR_NULL;
    char* value = nullptr;
    if (sd_bus_get_property_string(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                   "org.freedesktop.systemd1.Manager", "SystemState", &error, &value) >= 0) {
      state = value;
      std::free(value);
    }
    sd_bus_error_free(&error);
  }
  sd_bus_close_unref(bus);
  return state;
}

}  // namespace

std::unique_ptr<SystemdSandbox> SystemdSandbox::Start(const Options& options, std::string* why) {
  if (::geteuid() != 0) {
    *why = "a private systemd needs root";
    return nullptr;
  }
  for (const char* program : {kSystemd, kSocketProxyd}) {
    if (::access(program, X_OK) != 0) {
      *why = std::string(program) + " is not installed";
      return nullptr;
    }
  }
  std::string parent_cgroup = OwnCgroup2Dir();
  if (parent_cgroup.empty()) {
    *why = "no cgroup2 hierarchy is mounted (systemd needs one)";
    return nullptr;
  }

  std::unique_ptr<SystemdSandbox> box(new SystemdSandbox());
  try {
    box->temp_ = std::make_unique<testing::TempDir>();
  } catch (const std::exception& e) {
    *why = e.what();
    return nullptr;
  }
  box->dir_ = box->temp_->path();
  std::error_code ec;
  fs::create_directories(box->unit_dir(), ec);
  fs::create_directories(box->dir_ + "/run-systemd", ec);
  fs::create_directories(box->dir_ + "/no-generators", ec);
  {
    std::ofstream(box->unit_dir() + "/sandbox.target") << kSandboxTarget;
    std::ofstream(box->unit_dir() + "/csi-sandbox-relay.socket") << kRelaySocket;
    std::ofstream(box->unit_dir() + "/csi-sandbox-relay.service") << kRelayService;
    fs::create_directories(box->unit_dir() + "/sandbox.target.wants", ec);
    fs::create_symlink("../csi-sandbox-relay.socket",
                       box->unit_dir() + "/sandbox.target.wants/csi-sandbox-relay.socket", ec);
    for (const auto& [name, text] : options.units) std::ofstream(box->unit_dir() + "/" + name) << text;
    for (const auto& [name, target] : options.symlinks) {
      fs::path link = fs::path(box->unit_dir()) / name;
      fs::create_directories(link.parent_path(), ec);
      fs::create_symlink(target, link, ec);
      if (ec) {
        *why = "creating the unit symlink " + name + ": " + ec.message();
        return nullptr;
      }
    }
  }
  const std::string console = box->dir_ + "/console.log";
  std::ofstream(console).flush();

  static int counter = 0;
  box->cgroup_dir_ =
      parent_cgroup + "/csi-systemd-sandbox-" + std::to_string(::getpid()) + "-" + std::to_string(++counter);
  if (::mkdir(box->cgroup_dir_.c_str(), 0755) != 0) {
    *why = "creating the cgroup " + box->cgroup_dir_ + ": " + std::strerror(errno);
    box->cgroup_dir_.clear();
    return nullptr;
  }

  // Everything the children need, prepared before fork: after it only async-signal-safe calls are made.
  const std::string procs = box->cgroup_dir_ + "/cgroup.procs";
  const std::string run_systemd = box->dir_ + "/run-systemd";
  const std::string units = box->unit_dir();
  std::vector<std::string> env_strings = {
      "container=csi-proxy-test",
      "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
      "SYSTEMD_UNIT_PATH=/etc/systemd/system",
      "SYSTEMD_GENERATOR_PATH=" + box->dir_ + "/no-generators",
      "SYSTEMD_ENVIRONMENT_GENERATOR_PATH=" + box->dir_ + "/no-generators",
      "SYSTEMD_PROC_CMDLINE=",
      "SYSTEMD_LOG_COLOR=0",
  };
  std::vector<std::string> arg_strings = {kSystemd,
                                          "--unit=sandbox.target",
                                          "--show-status=no",
                                          "--log-target=console",
                                          "--log-level=info",
                                          "--default-standard-output=null",
                                          "--default-standard-error=null"};
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  for (auto& s : arg_strings) argv.push_back(s.data());
  argv.push_back(nullptr);

  int pid_pipe[2], err_pipe[2];
  if (::pipe2(pid_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    *why = std::string("pipe: ") + std::strerror(errno);
    return nullptr;
  }
  const pid_t test_pid = ::getpid();
  pid_t helper = ::fork();
  if (helper < 0) {
    *why = std::string("fork: ") + std::strerror(errno);
    return nullptr;
  }
  if (helper == 0) {
    // The helper: joins the new cgroup, creates the namespaces, forks systemd as their PID 1 and waits for it.
    ::close(pid_pipe[0]);
    ::close(err_pipe[0]);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != test_pid) _exit(1);
    int cg = ::open(procs.c_str(), O_WRONLY | O_CLOEXEC);
    if (cg < 0 || ::write(cg, "0", 1) != 1) ReportAndExit(err_pipe[1], "joining the sandbox cgroup");
    ::close(cg);
    if (::unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC) != 0) {
      ReportAndExit(err_pipe[1], "unshare(mount, pid, cgroup, uts, ipc namespaces)");
    }
    pid_t init = ::fork();
    if (init < 0) ReportAndExit(err_pipe[1], "fork of the sandbox init");
    if (init == 0) {
      ::close(pid_pipe[1]);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
        ReportAndExit(err_pipe[1], "making the mount namespace private");
      }
      if (::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
        ReportAndExit(err_pipe[1], "mounting /proc");
      }
      if (::mount("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0) {
        ReportAndExit(err_pipe[1], "mounting a tmpfs on /run");
      }
      if (::mkdir("/run/systemd", 0755) != 0) ReportAndExit(err_pipe[1], "mkdir /run/systemd");
      if (::mount(run_systemd.c_str(), "/run/systemd", nullptr, MS_BIND, nullptr) != 0) {
        ReportAndExit(err_pipe[1], "bind-mounting /run/systemd");
      }
      // The units are the sandbox's /etc/systemd/system: systemd counts enablement symlinks only in its config
      // directory, so "enabled" and "masked" mean there what they mean on a real host.
      if (::mount(units.c_str(), "/etc/systemd/system", nullptr, MS_BIND, nullptr) != 0) {
        ReportAndExit(err_pipe[1], "bind-mounting the units on /etc/systemd/system");
      }
      if (::mount("cgroup2", "/sys/fs/cgroup", "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
        ReportAndExit(err_pipe[1], "mounting cgroup2 on /sys/fs/cgroup");
      }
      // systemd logs to /dev/console; inside the sandbox that is the log file.
      ::mount(console.c_str(), "/dev/console", nullptr, MS_BIND, nullptr);
      int log = ::open(console.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
      int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (log >= 0) {
        ::dup2(log, 1);
        ::dup2(log, 2);
      }
      if (null >= 0) ::dup2(null, 0);
      ::execve(kSystemd, argv.data(), envp.data());
      ReportAndExit(err_pipe[1], "exec /lib/systemd/systemd");
    }
    ::close(err_pipe[1]);
    ssize_t ignored = ::write(pid_pipe[1], &init, sizeof init);
    (void)ignored;
    ::close(pid_pipe[1]);
    int status = 0;
    while (::waitpid(init, &status, 0) < 0 && errno == EINTR) {
    }
    _exit(0);
  }
  box->helper_pid_ = helper;
  ::close(pid_pipe[1]);
  ::close(err_pipe[1]);
  pid_t init = -1;
  ssize_t got = ::read(pid_pipe[0], &init, sizeof init);
  ::close(pid_pipe[0]);
  std::string child_error;
  char buf[256];
  ssize_t n;
  while ((n = ::read(err_pipe[0], buf, sizeof buf)) > 0) child_error.append(buf, static_cast<size_t>(n));
  ::close(err_pipe[0]);
  if (!child_error.empty() || got != sizeof init) {
    *why = "starting the sandbox: " + (child_error.empty() ? "the helper died" : DecodeChildError(child_error));
    return nullptr;  // the destructor reaps the helper and removes the cgroup and directory
  }
  box->init_pid_ = init;
  box->init_pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, init, 0));

  const Clock::time_point end = Clock::now() + options.boot_timeout;
  std::string state;
  while (Clock::now() < end) {
    int status = 0;
    if (::waitpid(box->helper_pid_, &status, WNOHANG) == box->helper_pid_) {
      box->helper_pid_ = -1;
      *why = "systemd exited during boot; its console said:\n" + box->ConsoleLog();
      return nullptr;
    }
    state = SystemState(box->private_socket());  // through the relay, as the tests will connect
    if (state == "running" || state == "degraded") return box;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  *why =
      "systemd did not finish booting in time (SystemState=\"" + state + "\"); its console said:\n" + box->ConsoleLog();
  return nullptr;
}

SystemdSandbox::~SystemdSandbox() { Stop(); }

void SystemdSandbox::Stop() {
  // Killing PID 1 of a PID namespace kills every process in it.
  if (init_pidfd_ >= 0) {
    ::syscall(SYS_pidfd_send_signal, init_pidfd_, SIGKILL, nullptr, 0);
    ::close(init_pidfd_);
    init_pidfd_ = -1;
  }
  if (helper_pid_ > 0) {
    const Clock::time_point end = Clock::now() + std::chrono::seconds(10);
    int status = 0;
    while (::waitpid(helper_pid_, &status, WNOHANG) == 0) {
      if (Clock::now() > end) {
        ::kill(helper_pid_, SIGKILL);  // our own child; its death takes the sandbox with it (PDEATHSIG)
        ::waitpid(helper_pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    helper_pid_ = -1;
  }
  if (!cgroup_dir_.empty()) RemoveCgroupTree(cgroup_dir_);
  cgroup_dir_.clear();
  temp_.reset();
  dir_.clear();
}

std::vector<pid_t> SystemdSandbox::UnitProcesses(const std::string& unit) const {
  std::vector<pid_t> pids;
  std::ifstream in(cgroup_dir_ + "/system.slice/" + unit + "/cgroup.procs");
  pid_t pid;
  while (in >> pid) pids.push_back(pid);
  return pids;
}

std::string SystemdSandbox::Systemctl(const std::vector<std::string>& args, int* exit_code) const {
  auto nsenter = common::FindSystemProgram("nsenter");
  if (!nsenter.ok()) {
    if (exit_code) *exit_code = -1;
    return nsenter.status().message();
  }
  std::vector<std::string> argv = {*nsenter, "--target", std::to_string(init_pid_), "--mount",
                                   "--pid",  "--",       "/usr/bin/systemctl",      "--no-pager"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = common::RunProgram(argv, {.timeout = std::chrono::seconds(30)});
  if (!r.ok()) {
    if (exit_code) *exit_code = -1;
    return r.status().message();
  }
  if (exit_code) *exit_code = r->exit_code;
  return r->output;
}

std::string SystemdSandbox::ConsoleLog() const { return ReadFile(dir_ + "/console.log"); }

}  // namespace csi_proxy::testing

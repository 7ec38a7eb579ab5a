// The runner of an isolated group on Linux: fork and exec of csi-proxy-runner on a socket pair (as descriptor 3)
// and a pipe for its standard output and error (the only descriptors it inherits), with a scrubbed environment, in
// a process group of its own, killed by the kernel if the host goes (PR_SET_PDEATHSIG), watched through its pidfd and
// reaped by its own pid. See runner_supervisor.h.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "abi/line_budget.h"
#include "config/trusted_files.h"
#include "isolation/runner_protocol.h"
#include "isolation/runner_supervisor.h"
#include "isolation/spin_read.h"

namespace csi_proxy::host {
namespace {

using SteadyClock = std::chrono::steady_clock;

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      Reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ~Fd() { Reset(); }
  int get() const { return fd_; }
  void Reset() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// How a runner ended; `host_killed`: the host's SIGKILL, which the reason then says.
std::string DescribeWaitStatus(int status, bool host_killed) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* abbrev = sigabbrev_np(sig);
    return "killed by signal " + std::to_string(sig) + (abbrev ? std::string(" (SIG") + abbrev + ")" : "") +
           (sig == SIGKILL && !host_killed ? ", as the OOM killer or an operator's kill -9 would" : "");
  }
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "ended (wait status " + std::to_string(status) + ")";
}

// The environment a runner gets: nothing of the host's but a fixed PATH and the sanitizers' options (a build
// with them would otherwise report differently in the runner than in the host). Leak checking is off in a runner:
// a library may end it with exit() from any of its threads (the crash tests do so on purpose), and
// LeakSanitizer's tracer then faults stopping the other threads, which turns the exit status into 1; the runner's
// own code is the host's, whose leaks the host's processes are checked for.
std::vector<std::string> RunnerEnvironment() {
  std::vector<std::string> env = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"};
  for (const char* name : {"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS"}) {
    const char* value = getenv(name);
    if (value == nullptr) continue;
    std::string entry = std::string(name) + "=" + value;
    if (std::string_view(name) == "ASAN_OPTIONS") entry += ":detect_leaks=0";
    env.push_back(std::move(entry));
  }
  return env;
}

StatusOr<ServiceRegistration> ServiceOf(const runner_proto::Service& s) {
  ServiceRegistration reg;
  reg.version = s.version();
  reg.service_name = s.service_name();
  if (reg.version.empty() || reg.service_name.empty() || s.methods_size() == 0 ||
      s.methods_size() > CSI_PROXY_MAX_METHODS_PER_SERVICE) {
    return Status(Code::kFailedPrecondition, "the runner described a malformed service '" + reg.service_name + "'");
  }
  for (const auto& m : s.methods()) {
    if (m.path().size() < 3 || m.path()[0] != '/') {
      return Status(Code::kFailedPrecondition, "the runner described a malformed method path");
    }
    MethodHandler handler;
    handler.flags = m.flags();
    reg.methods.emplace_back(m.path(), handler);
  }
  reg.file_descriptors.assign(s.file_descriptors().begin(), s.file_descriptors().end());
  return reg;
}

StatusOr<RunnerDescription> DescriptionOf(const runner_proto::Ready& ready) {
  if (ready.services_size() == 0 || ready.services_size() > CSI_PROXY_MAX_SERVICES_PER_LIBRARY) {
    return Status(Code::kFailedPrecondition,
                  "the runner described " + std::to_string(ready.services_size()) + " services");
  }
  RunnerDescription d;
  d.plugin_version = ready.plugin_version();
  d.abi_version = ready.abi_version();
  d.skipped_versions.assign(ready.skipped_versions().begin(), ready.skipped_versions().end());
  for (const auto& s : ready.services()) {
    CSI_PROXY_ASSIGN_OR_RETURN(ServiceRegistration reg, ServiceOf(s));
    for (const auto& [path, handler] : reg.methods) {
      d.method_paths.push_back(path);
      d.non_blocking.push_back(handler.non_blocking());
    }
    d.services.push_back(std::move(reg));
  }
  return d;
}

// What the runner is told to load: see runner.proto's Start.
runner_proto::Start StartMessage(const GroupConfig& group, const HostConfig& host) {
  toml::array working_dirs;
  for (const auto& d : host.working_dirs) working_dirs.push_back(d);
  toml::table host_table{{"kubelet_path", host.kubelet_path},
                         {"working_dirs", std::move(working_dirs)},
                         {"state_dir", host.state_dir},
                         {"plugin_dir", host.plugin_dir},
                         {"log_level", host.log_level},
                         {"load_timeout_seconds", host.load_timeout.count()},
                         {"workers", host.workers}};
  toml::table table = group.table;
  table.insert_or_assign("library", group.library);  // resolved against the host's plugin_dir already
  toml::table doc{{"host", std::move(host_table)}, {"groups", toml::table{{group.name, std::move(table)}}}};
  std::ostringstream text;
  text << doc;
  runner_proto::Start start;
  start.set_protocol_version(kRunnerProtocolVersion);
  start.set_config_toml(text.str());
  start.set_source(group.source);
  for (const auto& [key, line] : group.key_lines) (*start.mutable_key_lines())[key] = line;
  start.set_log_level(host.log_level);
  start.set_check_only(host.check_only);
  start.set_allow_untrusted_files(UntrustedFilesAllowed());
  start.set_host_pid(getpid());
  return start;
}

// Calls whose handle turned cancelled, for the supervisor's thread to tell the runner of. Shared with the calls'
// cancellation listeners, which may outlive the supervisor.
struct CancelInbox {
  std::mutex mu;
  std::vector<uint64_t> ids;  // guarded by mu
  std::atomic<bool> pending{false};
  Fd wake;  // the supervisor's eventfd

  void Add(uint64_t id) {
    {
      std::lock_guard lock(mu);
      ids.push_back(id);
    }
    pending.store(true, std::memory_order_release);
    uint64_t one = 1;
    (void)!write(wake.get(), &one, sizeof one);
  }
  std::vector<uint64_t> Take() {
    std::vector<uint64_t> taken;
    if (!pending.exchange(false, std::memory_order_acq_rel)) return taken;
    std::lock_guard lock(mu);
    taken.swap(ids);
    return taken;
  }
};

spdlog::level::level_enum LevelOf(int level) {
  return level >= spdlog::level::trace && level <= spdlog::level::critical
             ? static_cast<spdlog::level::level_enum>(level)
             : spdlog::level::err;
}

class LinuxRunnerSupervisor final : public RunnerSupervisor {
 public:
  LinuxRunnerSupervisor(const GroupConfig& group, const HostConfig& host)
      : group_(group.name),
        runner_path_(RunnerPath()),
        start_(StartMessage(group, host)),
        restart_limit_(group.restart_limit),
        restart_window_(std::chrono::seconds(group.restart_window_seconds)),
        hang_restart_(std::chrono::seconds(group.hang_restart_seconds)),
        max_unsent_bytes_(std::max<size_t>(kMaxUnsentBytes, static_cast<size_t>(group.max_request_bytes))),
        load_timeout_(host.load_timeout),
        wake_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
        epoll_(epoll_create1(EPOLL_CLOEXEC)) {
    cancels_->wake = Fd(fcntl(wake_.get(), F_DUPFD_CLOEXEC, 0));
  }

  ~LinuxRunnerSupervisor() override { Stop(SteadyClock::now()); }

  Status Begin(SteadyClock::time_point deadline) {
    if (wake_.get() < 0 || cancels_->wake.get() < 0) {
      return Internal("group '" + group_ + "': eventfd: " + std::strerror(errno));
    }
    epoll_event wake{};
    wake.events = EPOLLIN;
    wake.data.fd = wake_.get();
    if (epoll_.get() < 0 || epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &wake) != 0) {
      return Internal("group '" + group_ + "': epoll: " + std::strerror(errno));
    }
    first_deadline_ = deadline;
    thread_ = std::thread(&LinuxRunnerSupervisor::Run, this);
    std::unique_lock lock(mu_);
    started_cv_.wait(lock, [&] { return phase_ != Phase::kStarting; });
    if (phase_ == Phase::kUp) return Status::Ok();
    Status refused = first_failure_;
    lock.unlock();
    Stop(SteadyClock::now());
    return refused;
  }

  const RunnerDescription& description() const override { return description_; }

  void Send(uint32_t method_index, CallHandle call) override {
    std::unique_lock lock(mu_);
    if (phase_ != Phase::kUp || method_index >= description_.method_paths.size()) {
      std::string why = down_reason_;
      lock.unlock();
      call->Complete(CSI_PROXY_STATUS_UNAVAILABLE, why, {});
      return;
    }
    if (out_.size() + call->request().size() > max_unsent_bytes_) {
      // The runner takes no more (its reading thread is stuck, in a NONBLOCKING handler that blocks): the calls
      // sent meanwhile would grow this buffer without bound. Counted with the refusals of the group's budget.
      ++refused_before_;
      const std::string why = "group '" + group_ + "': its runner has not taken the " + std::to_string(out_.size()) +
                              " bytes of calls sent to it, and at most " + std::to_string(max_unsent_bytes_) +
                              " may wait (is a handler blocking the runner's reading thread?)";
      lock.unlock();
      call->Complete(CSI_PROXY_STATUS_RESOURCE_EXHAUSTED, why, {});
      return;
    }
    const uint64_t id = ++next_id_;
    sent_.store(id, std::memory_order_relaxed);
    runner_proto::RunnerMessage message;
    runner_proto::Call* c = message.mutable_call();
    c->set_id(id);
    c->set_method(method_index);
    c->set_request(std::string(call->request()));
    c->set_deadline_unix_ns(call->DeadlineUnixNs());
    c->set_peer_pid(call->info().peer.pid);
    c->set_peer_uid(call->info().peer.uid);
    c->set_peer_gid(call->info().peer.gid);
    csi_proxy_host_call* sent = call.get();  // held in calls_ while mu_ is
    // A call that would run inline in process (NONBLOCKING), sent when nobody reads the socket: this thread waits
    // for its answer itself, as it would run the handler in process, and completes the answers of the group's other
    // calls that come before it on a gRPC thread too (where finishing a call costs gRPC no wake-up of a poller).
    const bool await_here =
        description_.non_blocking[method_index] && out_.empty() && !reading_ && !stopping_ && sock_ >= 0;
    // Whether this thread spins for the answer (the reader role's gate, which it takes here), only when the group
    // has no other call in flight.
    const bool spin = await_here && calls_.empty() && spin_gate_.Spin();
    calls_.emplace(id, std::move(call));
    // Before the write: an answer that comes at once must not wake the supervisor's thread.
    if (await_here) TakeReaderLocked(true);
    const bool idle = out_.empty();
    AppendFrame(message, out_);
    sent->OnCancelled([inbox = std::weak_ptr<CancelInbox>(cancels_), id] {
      if (auto cancels = inbox.lock()) cancels->Add(id);
    });
    if (idle) FlushLocked();
    // What the socket did not take now, the supervisor's thread writes when it can.
    if (!out_.empty()) Wake();
    if (!await_here) return;
    const int sock = sock_;
    lock.unlock();
    AwaitAnswer(sock, id, spin);
  }

  void Stop(SteadyClock::time_point deadline) override {
    {
      std::lock_guard lock(mu_);
      if (!stopping_) {
        stopping_ = true;
        stop_deadline_ = deadline;
        runner_proto::RunnerMessage message;
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
        message.mutable_shutdown()->set_timeout_ms(std::max<int64_t>(0, left.count()));
        if (sock_ >= 0) AppendFrame(message, out_);
        Wake();
        stop_cv_.notify_all();
      }
    }
    if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
  }

  RunnerUsage usage() const override {
    std::lock_guard lock(mu_);
    RunnerUsage u;
    u.pid = phase_ == Phase::kUp ? pid_ : 0;
    u.restarts = restarts_;
    u.failed = phase_ == Phase::kFailed;
    u.last_exit = last_exit_;
    return u;
  }

  RunnerBudget Budget(std::chrono::milliseconds wait) override {
    std::unique_lock lock(mu_);
    if (phase_ == Phase::kUp && sock_ >= 0 && !stopping_) {
      const uint64_t seq = ++budget_asked_;
      runner_proto::RunnerMessage message;
      message.mutable_usage_request()->set_seq(seq);
      const bool idle = out_.empty();
      AppendFrame(message, out_);
      if (idle) FlushLocked();
      if (!out_.empty()) Wake();
      budget_cv_.wait_for(lock, wait, [&] { return budget_answered_ >= seq || phase_ != Phase::kUp; });
    }
    RunnerBudget budget = budget_;
    budget.refused += refused_before_;
    return budget;
  }

  void SetLogLevel(const std::string& level) override {
    std::lock_guard lock(mu_);
    start_.set_log_level(level);
    if (sock_ < 0) return;  // the next runner's Start says it
    runner_proto::RunnerMessage message;
    message.mutable_log_level()->set_level(level);
    AppendFrame(message, out_);
    Wake();
  }

  void OnAvailability(std::function<void(bool)> listener) override {
    std::lock_guard lock(mu_);
    listener_ = std::move(listener);
  }

 private:
  enum class Phase { kStarting, kUp, kDown, kFailed, kStopped };

  // How long a thread that sent a NONBLOCKING call waits for its answer before the supervisor's thread takes it
  // over: far above the round trip (some 40 us on a quiet machine), and short enough that a handler that blocks
  // in spite of its flag holds one of gRPC's threads no longer than this.
  static constexpr std::chrono::milliseconds kAwaitAnswer{1};
  // How long it spins before it sleeps: above the round trip to a runner whose reader is awake (it spins for the
  // next call while calls come back to back) and whose NONBLOCKING handler answers at once, some 15-30 us on a
  // quiet machine.
  static constexpr std::chrono::microseconds kSpinBound{50};
  // What one read of the runner's socket takes at most.
  static constexpr size_t kRead = 64 * 1024;
  // What the host writes of a runner's words (runner_protocol.h's PrintableRunnerText): the code its library ran
  // when it crashed (the runner sends at most 120 bytes), its library's refusal; and how many of its log lines a
  // second (a runner cannot flood the host's log and disk).
  static constexpr size_t kMaxCrashWork = 120;
  static constexpr size_t kMaxLoadFailure = 4096;
  static constexpr size_t kRunnerLogBurst = 200;
  // The calls sent that the runner's socket has not taken, in bytes, at most (or max_request_bytes if larger): as
  // much as the group's queue in the runner holds (serving/group_executor.h's max_queued_bytes).
  static constexpr size_t kMaxUnsentBytes = 16 * 1024 * 1024;

  // The socket's reader: one thread at a time reads the socket and handles what it brings, the supervisor's (the
  // default) or one that sent a call and waits for its answer (`awaiting`, AwaitAnswer). While the latter reads,
  // the supervisor's epoll does not watch the socket for input, so that the answer wakes only the thread that
  // waits for it; a hang-up or an error is reported to the supervisor whatever it watches, and it then waits for
  // the reader to finish before it reads the end. Caller holds mu_.
  void TakeReaderLocked(bool awaiting) {
    reading_ = true;
    awaiting_ = awaiting;
    if (awaiting_) WatchSocketLocked();
  }
  void ReleaseReaderLocked() {
    reading_ = false;
    if (std::exchange(awaiting_, false)) WatchSocketLocked();
    reader_free_cv_.notify_all();
  }
  // What the supervisor's epoll watches on the socket: input unless a thread awaits its answer, room for output
  // while frames wait. An input already there when input is watched again wakes the supervisor at once.
  void WatchSocketLocked() {
    if (sock_ < 0) return;
    const uint32_t events = (awaiting_ ? 0u : EPOLLIN) | (out_.empty() ? 0u : EPOLLOUT);
    if (events == watched_) return;
    epoll_event e{};
    e.events = events;
    e.data.fd = sock_;
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, sock_, &e) == 0) watched_ = events;
  }

  // Waits until the call `id` is answered, reading the socket and handling whatever it brings (the answers of
  // other calls too), or until kAwaitAnswer passed or the socket ended; the supervisor's thread handles the rest.
  // With `spin`, it spins first (spin_read.h) for at most kSpinBound: an answer found so costs neither this
  // thread's wake-up nor the runner's waking it. This thread holds the reader role (Send took it).
  void AwaitAnswer(int sock, uint64_t id, bool spin) {
    const auto start = SteadyClock::now();
    Answers answers;
    // Takes what a read brought; true once the wait is over: the answer came, the runner is to be killed, or the
    // socket ended (the supervisor's thread then reads the end).
    auto over = [&](ssize_t n) {
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
      if (n <= 0) return true;
      reader_.Filled(static_cast<size_t>(n));
      return !HandleMessages(nullptr, id, &answers).empty() || answers.came;
    };
    bool done = false;
    if (spin) {
      // Only while the group has no other call: other calls sent meanwhile (many clients) want the CPU this
      // thread would spin on, and this thread's wait in poll below reads their answers as well.
      const uint64_t sent = sent_.load(std::memory_order_relaxed);
      auto alone = [&] { return sent_.load(std::memory_order_relaxed) == sent; };
      const auto spin_until = start + kSpinBound;
      while (!done && SteadyClock::now() < spin_until && alone()) {
        done = over(SpinRecv(sock, reader_.Space(kRead), kRead, spin_until, alone));
      }
      spin_gate_.Spun(answers.came && alone());
    }
    const auto until = start + kAwaitAnswer;
    while (!done) {
      pollfd p{sock, POLLIN, 0};
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - SteadyClock::now());
      if (left.count() <= 0) break;
      const int ready = poll(&p, 1, static_cast<int>(left.count()));
      if (ready < 0 && errno == EINTR) continue;
      // The time passed, or the socket ended: the supervisor's thread takes over, and reads the end.
      if (ready <= 0 || (p.revents & POLLIN) == 0) break;
      done = over(recv(sock, reader_.Space(kRead), kRead, MSG_DONTWAIT));
    }
    {
      std::lock_guard lock(mu_);
      ReleaseReaderLocked();
    }
    // Completed only now: its client's next call, which may come as soon as the answer is written, then finds the
    // reader role free and is awaited in turn rather than left to the supervisor's thread.
    answers.CompleteAll();
  }

  void Wake() {
    uint64_t one = 1;
    (void)!write(wake_.get(), &one, sizeof one);
  }

  // Writes what the socket takes now without waiting. Caller holds mu_.
  void FlushLocked() {
    while (!out_.empty() && sock_ >= 0) {
      ssize_t n = send(sock_, out_.data(), out_.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) {
        out_.erase(0, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      return;  // full (the thread waits for POLLOUT) or broken (the thread sees the runner gone)
    }
  }

  struct Spawned {
    pid_t pid = 0;
    Fd pidfd;
    Fd sock;
    Fd output;  // the read end of the runner's standard output and error
  };

  // Runs on the supervisor's thread: PR_SET_PDEATHSIG is tied to the thread that forks, and this one lives until
  // the runner is reaped.
  StatusOr<Spawned> Spawn() {
    CSI_PROXY_ASSIGN_OR_RETURN(TrustedFile exe, OpenTrustedFile(runner_path_, "the runner executable"));
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
      return Internal(std::string("socketpair: ") + std::strerror(errno));
    }
    Fd mine(pair[0]);
    Fd theirs_low(pair[1]);
    // Above 3, so that the child's dup2 onto 0 and 3 cannot overwrite one of them.
    Fd theirs(fcntl(theirs_low.get(), F_DUPFD_CLOEXEC, 10));
    Fd exe_fd(fcntl(static_cast<int>(exe.handle()), F_DUPFD_CLOEXEC, 10));
    // Its standard output and error are a pipe the host reads and logs as the runner's log lines
    // (LogRunnerOutput), not the host's own: what a library writes there would otherwise pass for the host's lines,
    // unescaped and unbounded (the journal even gives them the host's pid).
    int output[2];
    if (pipe2(output, O_CLOEXEC) != 0) return Internal(std::string("pipe2: ") + std::strerror(errno));
    Fd output_read(output[0]);
    Fd output_write_low(output[1]);
    Fd output_write(fcntl(output_write_low.get(), F_DUPFD_CLOEXEC, 10));
    Fd devnull(fcntl(Fd(open("/dev/null", O_RDWR | O_CLOEXEC)).get(), F_DUPFD_CLOEXEC, 10));
    if (theirs.get() < 0 || exe_fd.get() < 0 || devnull.get() < 0 || output_write.get() < 0) {
      return Internal(std::string("preparing the runner's descriptors: ") + std::strerror(errno));
    }
    // Everything the child uses is made before the fork: between fork and exec it may only make system calls.
    std::vector<std::string> args = {"csi-proxy-runner", "--group", group_, "--fd", "3"};
    std::vector<std::string> env = RunnerEnvironment();
    std::vector<char*> argv, envp;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    const pid_t parent = getpid();
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);  // no host signal handler runs in the child
    const pid_t pid = fork();
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);  // the host went between fork and prctl
      // A process group of its own: a library's kill(0, ...) or killpg(getpgrp(), ...), the usual way to stop the
      // programs it ran, then reaches only the runner and its children, never the host; and a stop sent to the
      // terminal's foreground group (Ctrl-C) does not reach it either. Not a session of its own: where the kernel
      // shares the CPU between sessions (autogroup, with no cgroup for the service), a runner in its own would
      // get a share of its own, and its spin (spin_read.h), which yields to the host's threads in a shared one,
      // would take that share from them (its CPU per call doubled at 16 and 64 clients). What a session would
      // add, no controlling terminal, the filter gives: it refuses TIOCSTI and TIOCLINUX. PR_SET_PDEATHSIG stays.
      if (setpgid(0, 0) < 0) _exit(127);
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &dfl, nullptr);
      if (dup2(devnull.get(), 0) < 0 || dup2(output_write.get(), 1) < 0 || dup2(output_write.get(), 2) < 0 ||
          dup2(theirs.get(), 3) < 0) {
        _exit(127);
      }
      // Every other descriptor goes at the exec (the executable's own is needed until then); a kernel before 5.11
      // has no CLOSE_RANGE_CLOEXEC, and then they are closed one by one.
      if (syscall(SYS_close_range, 4u, ~0u, 4u /* CLOSE_RANGE_CLOEXEC */) != 0) {
        rlimit files{};
        getrlimit(RLIMIT_NOFILE, &files);
        for (int fd = 4; fd < static_cast<int>(std::min<rlim_t>(files.rlim_cur, 1 << 20)); ++fd) {
          if (fd != exe_fd.get()) close(fd);
        }
      }
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      syscall(SYS_execveat, exe_fd.get(), "", argv.data(), envp.data(), AT_EMPTY_PATH);
      _exit(127);
    }
    const int fork_errno = errno;
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    if (pid < 0) return Internal(std::string("fork: ") + std::strerror(fork_errno));
    Spawned s;
    s.pid = pid;
    s.pidfd = Fd(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
    s.sock = std::move(mine);
    s.output = std::move(output_read);
    for (int fd : {s.sock.get(), s.output.get()}) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return s;
  }

  // Waits for the runner to end (its socket is gone, so it is ending or lost its socket), kills it when it has
  // not ended within `grace`, reaps it; how it ended.
  std::string Reap(Spawned& s, std::chrono::milliseconds grace, bool host_killed) {
    int status = 0;
    if (s.pidfd.get() >= 0) {
      pollfd p{s.pidfd.get(), POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(grace.count())) == 0) kill(s.pid, SIGKILL);
    } else {
      // No pidfd (a kernel before 5.3): asked every 10 ms instead.
      for (auto end = SteadyClock::now() + grace; SteadyClock::now() < end;) {
        if (waitpid(s.pid, &status, WNOHANG) == s.pid) return DescribeWaitStatus(status, host_killed);
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      kill(s.pid, SIGKILL);
    }
    while (waitpid(s.pid, &status, 0) < 0 && errno == EINTR) {
    }
    return DescribeWaitStatus(status, host_killed);
  }

  // Answers every call the runner had, UNAVAILABLE with `why`.
  void FailCalls(const std::string& why) {
    std::unordered_map<uint64_t, CallHandle> calls;
    {
      std::lock_guard lock(mu_);
      calls.swap(calls_);
    }
    for (auto& [id, call] : calls) call->Complete(CSI_PROXY_STATUS_UNAVAILABLE, why, {});
  }

  // The call `id` no longer in flight, or null when it is not (answered already: a forged or repeated id changes
  // nothing).
  CallHandle TakeCall(uint64_t id) {
    std::lock_guard lock(mu_);
    auto it = calls_.find(id);
    if (it == calls_.end()) return nullptr;
    CallHandle call = std::move(it->second);
    calls_.erase(it);
    return call;
  }

  // Answers a reader found: their calls, taken while it still read (so that a runner's end right after cannot
  // answer them UNAVAILABLE), completed once it gave the reading up, so that another thread may read meanwhile.
  struct Answers {
    bool came = false;  // the answer of the call a thread awaits is among them
    std::vector<std::pair<CallHandle, runner_proto::Completion>> calls;
    void CompleteAll() {
      for (auto& [call, c] : calls) call->Complete(c.code(), c.message(), c.response());
      calls.clear();
    }
  };

  // Tells the runner of the calls whose handle turned cancelled (the client cancelled, or the host answered them
  // at their deadline), so that their handlers see them cancelled, as call_is_cancelled says in process.
  // Caller holds mu_.
  void ForwardCancellationsLocked() {
    for (uint64_t id : cancels_->Take()) {
      if (calls_.count(id) == 0) continue;  // answered meanwhile
      runner_proto::RunnerMessage message;
      message.mutable_cancel()->set_id(id);
      AppendFrame(message, out_);
    }
  }

  void TakeUsage(const runner_proto::Usage& usage) {
    std::lock_guard lock(mu_);
    // The runner's word, shown by the status and the metrics: no negative count, and no answer to a question not
    // asked (a forged seq would make every later Budget take the old numbers without waiting).
    budget_.running = std::max(0, usage.running());
    budget_.queued = usage.queued();
    budget_.refused = usage.refused();
    budget_.threads = std::max(0, usage.threads());
    budget_answered_ = std::max(budget_answered_, std::min(usage.seq(), budget_asked_));
    budget_cv_.notify_all();
  }

  // The oldest call still running past its deadline by hang_restart_seconds, or empty.
  std::string HungCall() {
    if (hang_restart_.count() == 0) return {};
    const auto limit = std::chrono::system_clock::now() - hang_restart_;
    std::lock_guard lock(mu_);
    for (const auto& [id, call] : calls_) {
      if (call->info().deadline < limit) return call->info().method;
    }
    return {};
  }

  // Serves one runner until it ends or is killed; the reason it ended as the host saw it (empty: a shutdown).
  // `handshake_deadline`: when the runner must have answered its Start.
  std::string Serve(Spawned& s, SteadyClock::time_point handshake_deadline, bool first) {
    {
      std::lock_guard lock(mu_);
      sock_ = s.sock.get();
      pid_ = s.pid;
      killed_.clear();
      reader_ = FrameReader();
      runner_proto::RunnerMessage start;
      *start.mutable_start() = start_;
      std::string frame;
      AppendFrame(start, frame);
      out_.insert(0, frame);  // before anything else, whatever was queued
      epoll_event e{};
      e.events = watched_ = EPOLLIN | EPOLLOUT;
      e.data.fd = sock_;
      epoll_event output{};
      output.events = EPOLLIN;
      output.data.fd = s.output.get();
      if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, sock_, &e) != 0 ||
          epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, s.output.get(), &output) != 0) {
        kill(s.pid, SIGKILL);
        return std::string("epoll: ") + std::strerror(errno);
      }
    }
    struct Unwatch {
      LinuxRunnerSupervisor& self;
      ~Unwatch() {
        // No thread reads the socket past here, nor takes it up: it is closed once the runner is reaped.
        std::unique_lock lock(self.mu_);
        self.reader_free_cv_.wait(lock, [&] { return !self.reading_; });
        epoll_ctl(self.epoll_.get(), EPOLL_CTL_DEL, self.sock_, nullptr);
        self.sock_ = -1;
        epoll_ctl(self.epoll_.get(), EPOLL_CTL_DEL, output, nullptr);  // read to its end once the runner is reaped
      }
      const int output;
    } unwatch{*this, s.output.get()};
    Handshake handshake{false, first};
    auto last_hang_check = SteadyClock::now();
    for (;;) {
      {
        std::lock_guard lock(mu_);
        ForwardCancellationsLocked();
        FlushLocked();
        WatchSocketLocked();
      }
      epoll_event events[3];
      const int n = epoll_wait(epoll_.get(), events, 3, 200);
      if (n < 0 && errno != EINTR) return std::string("epoll_wait: ") + std::strerror(errno);
      uint32_t socket_events = 0;
      for (int i = 0; i < n; ++i) {
        if (events[i].data.fd == wake_.get()) {
          uint64_t count;
          (void)!read(wake_.get(), &count, sizeof count);
        } else if (events[i].data.fd == s.output.get()) {
          // One read a turn, so that a runner writing without end holds nothing else up; at its end (all writers
          // gone: the runner and the programs it ran), it is no longer watched.
          const ssize_t got = LogRunnerOutput(s.output.get());
          if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
            epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, s.output.get(), nullptr);
          }
        } else {
          socket_events = events[i].events;
        }
      }
      const auto now = SteadyClock::now();
      if (!handshake.ready && now > handshake_deadline) {
        kill(s.pid, SIGKILL);
        return "its library was not loaded within load_timeout_seconds (" + std::to_string(load_timeout_.count()) +
               " s); the host killed it";
      }
      bool past_stop;
      {
        std::lock_guard lock(mu_);
        past_stop = stopping_ && now > stop_deadline_ + std::chrono::milliseconds(100);
      }
      if (past_stop) KillRunner("the host killed it: it had not shut down by the stop's deadline");
      if (now - last_hang_check > std::chrono::milliseconds(200)) {
        last_hang_check = now;
        if (std::string hung = HungCall(); !hung.empty()) {
          KillRunner("the host killed it: " + hung + " was still running " + std::to_string(hang_restart_.count()) +
                     " s after its deadline (hang_restart_seconds)");
        }
      }
      if ((socket_events & (EPOLLIN | EPOLLHUP | EPOLLERR)) == 0) continue;
      {
        // Another thread reads (AwaitAnswer): the end, or what it leaves, is read once it is done.
        std::unique_lock lock(mu_);
        reader_free_cv_.wait(lock, [&] { return !reading_; });
        TakeReaderLocked(false);
      }
      const bool open = ReceiveAvailable(s.sock.get());
      Answers answers;
      std::string ended = HandleMessages(&handshake, 0, &answers);
      {
        std::lock_guard lock(mu_);
        ReleaseReaderLocked();
      }
      answers.CompleteAll();
      if (!ended.empty()) return ended;
      if (!open) return killed_;  // empty: it ended on its own (a shutdown, or Reap tells how)
    }
  }

  // Reads what the socket holds now into reader_; false when it ended (closed, or broken). Caller holds the
  // reader role.
  bool ReceiveAvailable(int sock) {
    for (;;) {
      char* space = reader_.Space(kRead);
      ssize_t n = recv(sock, space, kRead, MSG_DONTWAIT);
      if (n > 0) {
        reader_.Filled(static_cast<size_t>(n));
        if (static_cast<size_t>(n) < kRead) return true;  // all there was: poll says when there is more
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      return false;
    }
  }

  // Where the handshake stands; only the supervisor's thread reads while it goes on.
  struct Handshake {
    bool ready = false;
    bool first = false;
  };

  // Handles every whole message reader_ holds. Empty, or why the runner must end: the host killed it (a corrupt
  // stream, a message out of turn, a handshake refused) or its library was refused. `handshake`: null on a thread
  // that waits for an answer (the runner is up then, and only answers, usage, a crash's report and log lines may
  // come); the answers go to `*answers`, for the caller to complete once it gave up the reader role, and
  // `answers->came` says whether the call `awaited` (0: none) is among them. Caller holds the reader role.
  std::string HandleMessages(Handshake* handshake, uint64_t awaited, Answers* answers) {
    runner_proto::RunnerMessage m;
    for (;;) {
      auto next = reader_.Next(m);
      if (!next.ok()) return KillRunner("the host killed it: its socket carried " + next.status().message());
      if (!*next) return {};
      if (m.has_completion()) {
        if (m.completion().id() == awaited) answers->came = true;
        if (CallHandle call = TakeCall(m.completion().id())) {
          // A code gRPC does not have is UNKNOWN to its clients anyway: said so here, as a status they can read.
          if (m.completion().code() < CSI_PROXY_STATUS_OK || m.completion().code() > CSI_PROXY_STATUS_UNAUTHENTICATED) {
            m.mutable_completion()->set_code(CSI_PROXY_STATUS_UNKNOWN);
          }
          answers->calls.emplace_back(std::move(call), std::move(*m.mutable_completion()));
        }
      } else if (m.has_usage()) {
        TakeUsage(m.usage());
      } else if (m.has_crashing()) {
        std::lock_guard lock(mu_);
        crash_work_ = PrintableRunnerText(m.crashing().work(), kMaxCrashWork);
      } else if (m.has_log()) {
        LogFromRunner(LevelOf(m.log().level()), m.log().text());
      } else if (handshake != nullptr && m.has_ready() && !handshake->ready) {
        if (Status accepted = Accept(m.ready(), handshake->first); !accepted.ok()) {
          return KillRunner(accepted.message());
        }
        handshake->ready = true;
      } else if (handshake != nullptr && m.has_load_failed() && !handshake->ready) {
        std::lock_guard lock(mu_);
        const int code = m.load_failed().code();
        first_failure_ = Status(
            code > 0 && code <= static_cast<int>(Code::kUnauthenticated) ? static_cast<Code>(code) : Code::kUnknown,
            PrintableRunnerText(m.load_failed().message(), kMaxLoadFailure));
        return "its library was refused: " + first_failure_.message();
      } else {
        return KillRunner("the host killed it: it sent a message out of turn");
      }
    }
  }

  // A line of the runner's log, in the host's words (RunnerLogLine) and within the runner's line budget.
  void LogFromRunner(spdlog::level::level_enum level, std::string_view text) {
    if (!spdlog::should_log(level)) return;
    uint64_t not_logged = 0;
    if (!log_budget_.Allow({}, not_logged)) return;
    spdlog::log(level, "{}{}", RunnerLogLine(group_, text),
                not_logged == 0 ? ""
                                : " (" + std::to_string(not_logged) + " lines of the runner before this one were not " +
                                      "logged: more than " + std::to_string(kRunnerLogBurst) + " a second)");
  }

  // Reads what the runner's standard output and error hold now (one read) and logs each whole line at warn level;
  // what the read returned (0: they ended). Only the supervisor's thread calls it.
  ssize_t LogRunnerOutput(int fd) {
    char buffer[kRead];
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n <= 0) return n;
    output_line_.append(buffer, static_cast<size_t>(n));
    size_t begin = 0;
    for (size_t end; (end = output_line_.find('\n', begin)) != std::string::npos; begin = end + 1) {
      LogFromRunner(spdlog::level::warn, std::string_view(output_line_).substr(begin, end - begin));
    }
    output_line_.erase(0, begin);
    // A line without end is cut where a log line would be.
    if (output_line_.size() > kMaxRunnerLogLine) LogFromRunner(spdlog::level::warn, std::exchange(output_line_, {}));
    return n;
  }

  // Kills the runner that serves now; `why` is what Serve reports (the first reason given).
  std::string KillRunner(std::string why) {
    std::lock_guard lock(mu_);
    if (pid_ > 0) kill(pid_, SIGKILL);
    if (killed_.empty()) killed_ = std::move(why);
    return killed_;
  }

  // The runner's handshake: the first one describes the group; a restarted runner must describe the same.
  Status Accept(const runner_proto::Ready& ready, bool first) {
    if (ready.protocol_version() != kRunnerProtocolVersion) {
      return Status(Code::kFailedPrecondition, "the runner speaks protocol version " +
                                                   std::to_string(ready.protocol_version()) + ", the host " +
                                                   std::to_string(kRunnerProtocolVersion));
    }
    auto described = DescriptionOf(ready);
    if (!described.ok()) return described.status();
    std::lock_guard lock(mu_);
    if (first) {
      description_ = std::move(*described);
    } else if (described->method_paths != description_.method_paths) {
      return Status(Code::kFailedPrecondition,
                    "the restarted runner's library registers other methods than the group serves (was the library "
                    "replaced? a reload serves the new one)");
    }
    phase_ = Phase::kUp;
    down_reason_.clear();
    started_cv_.notify_all();
    return Status::Ok();
  }

  void Run() {
    bool first = true;
    std::deque<SteadyClock::time_point> ends;  // when runners ended, within restart_window
    for (;;) {
      auto spawned = Spawn();
      std::string why, how;
      pid_t pid = 0;
      if (!spawned.ok()) {
        why = "it could not be started: " + spawned.status().message();
      } else {
        pid = spawned->pid;
        auto handshake = first ? first_deadline_ : SteadyClock::now() + load_timeout_;
        why = Serve(*spawned, handshake, first);
        how = Reap(*spawned, std::chrono::seconds(2), !why.empty());
        // What it wrote last (a sanitizer's report, glibc's word on a corrupt heap), ahead of the line on its end;
        // a program it ran that lives on and keeps writing is not waited for.
        for (int reads = 0; reads < 16 && LogRunnerOutput(spawned->output.get()) > 0; ++reads) {
        }
        if (!output_line_.empty()) LogFromRunner(spdlog::level::warn, std::exchange(output_line_, {}));
        std::lock_guard lock(mu_);
        if (!crash_work_.empty()) how += " while its library ran " + std::exchange(crash_work_, {});
      }
      bool stopping;
      {
        // Calls sent from here on are refused at once: none may reach the next runner unanswered here.
        std::lock_guard lock(mu_);
        sock_ = -1;
        pid_ = 0;
        out_.clear();
        // The next runner counts from nothing; what this one refused stays counted.
        refused_before_ += budget_.refused;
        budget_ = RunnerBudget{};
        budget_cv_.notify_all();
        if (phase_ == Phase::kUp) {
          phase_ = Phase::kDown;
          down_reason_ = "group '" + group_ + "': its runner ended; it is being restarted, retry";
        }
        stopping = stopping_;
        last_exit_ = how;
      }
      std::string what = "group '" + group_ + "': its runner" + (pid ? " (pid " + std::to_string(pid) + ")" : "") +
                         (how.empty() ? "" : " " + how) + (why.empty() ? "" : "; " + why);
      if (first && phase_ == Phase::kStarting) {
        // The first start decides the load: a refusal is the library's; anything else the runner's.
        std::lock_guard lock(mu_);
        if (first_failure_.ok()) first_failure_ = Unavailable(what + " before its library was loaded");
        phase_ = Phase::kStopped;
        started_cv_.notify_all();
        return;
      }
      first = false;
      if (stopping) {
        FailCalls("group '" + group_ + "' stopped before the call finished" + (why.empty() ? "" : " (" + why + ")"));
        std::lock_guard lock(mu_);
        phase_ = Phase::kStopped;
        return;
      }
      FailCalls(what + "; the call's outcome is unknown");
      const auto now = SteadyClock::now();
      ends.push_back(now);
      while (!ends.empty() && now - ends.front() > restart_window_) ends.pop_front();
      std::function<void(bool)> listener;
      bool failed = false;
      {
        std::lock_guard lock(mu_);
        if (static_cast<int>(ends.size()) > restart_limit_) {
          phase_ = Phase::kFailed;
          down_reason_ = "group '" + group_ + "' failed: its runner ended " + std::to_string(ends.size()) +
                         " times within " + std::to_string(restart_window_.count()) +
                         " s (restart_limit, restart_window_seconds), the last time " + how +
                         "; a reload serves it again";
          listener = listener_;
          failed = true;
        } else {
          phase_ = Phase::kDown;
          down_reason_ = what + "; it is being restarted, retry";
        }
      }
      spdlog::error("{}", failed ? down_reason_ : what + "; restarting it");
      if (failed) {
        if (listener) listener(false);
        std::unique_lock lock(mu_);
        stop_cv_.wait(lock, [&] { return stopping_; });
        phase_ = Phase::kStopped;
        return;
      }
      // Backoff: 100 ms, doubled for each end within the window, at most 5 s.
      auto backoff = std::min<std::chrono::milliseconds>(
          std::chrono::milliseconds(100 << std::min<size_t>(ends.size() - 1, 6)), std::chrono::seconds(5));
      std::unique_lock lock(mu_);
      if (stop_cv_.wait_for(lock, backoff, [&] { return stopping_; })) {
        phase_ = Phase::kStopped;
        return;
      }
      ++restarts_;
    }
  }

  const std::string group_;
  const std::string runner_path_;
  runner_proto::Start start_;  // guarded by mu_ (the log level changes)
  const int restart_limit_;
  const std::chrono::seconds restart_window_;
  const std::chrono::seconds hang_restart_;
  const size_t max_unsent_bytes_;
  const std::chrono::seconds load_timeout_;
  Fd wake_;
  Fd epoll_;  // the supervisor's thread waits on wake_ and the runner's socket
  SteadyClock::time_point first_deadline_;
  std::thread thread_;
  RunnerDescription description_;  // set once by the first handshake, before Begin returns

  mutable std::mutex mu_;
  std::condition_variable started_cv_;
  std::condition_variable stop_cv_;
  Phase phase_ = Phase::kStarting;
  Status first_failure_;
  std::string down_reason_;
  int sock_ = -1;
  pid_t pid_ = 0;
  std::string out_;                // frames the socket has not taken yet
  bool reading_ = false;           // a thread holds the reader role (TakeReaderLocked)
  bool awaiting_ = false;          // ... and it is one that waits for its call's answer (AwaitAnswer)
  SpinGate spin_gate_;             // the reader role's only (Send asks it as it takes the role for AwaitAnswer)
  std::atomic<uint64_t> sent_{0};  // next_id_, for AwaitAnswer to see without mu_ that another call was sent
  std::condition_variable reader_free_cv_;
  uint32_t watched_ = 0;  // what the supervisor's epoll watches on sock_
  FrameReader reader_;    // bytes from the runner; the reader role's only
  std::string killed_;    // why the host killed the runner serving now, the first reason
  std::unordered_map<uint64_t, CallHandle> calls_;
  const std::shared_ptr<CancelInbox> cancels_ = std::make_shared<CancelInbox>();
  std::condition_variable budget_cv_;
  RunnerBudget budget_;          // as the runner serving now said last
  uint64_t refused_before_ = 0;  // by the runners that ended, and by the host while a runner took no more calls
  uint64_t budget_asked_ = 0, budget_answered_ = 0;
  uint64_t next_id_ = 0;
  uint64_t restarts_ = 0;
  std::string last_exit_;
  std::string crash_work_;  // what the runner's library ran when it crashed, as the runner's signal handler said
  LineBudget log_budget_{kRunnerLogBurst, std::chrono::seconds(1)};  // the lines a runner makes the host write
  std::string output_line_;  // the runner's standard output and error since their last whole line; Run's thread's
  bool stopping_ = false;
  SteadyClock::time_point stop_deadline_;
  std::function<void(bool)> listener_;
};

}  // namespace

std::string RunnerSupervisor::RunnerPath() { return ExecutableDirectory() + "/csi-proxy-runner"; }

StatusOr<std::unique_ptr<RunnerSupervisor>> RunnerSupervisor::Start(const GroupConfig& group, const HostConfig& host,
                                                                    SteadyClock::time_point deadline) {
  auto supervisor = std::make_unique<LinuxRunnerSupervisor>(group, host);
  Status started = supervisor->Begin(deadline);
  if (!started.ok()) {
    if (started.message().rfind("group '", 0) == 0) return started;
    return Status(started.code(), "group '" + group.name + "' (" + group.library + "): " + started.message());
  }
  return std::unique_ptr<RunnerSupervisor>(std::move(supervisor));
}

}  // namespace csi_proxy::host

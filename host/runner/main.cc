// csi-proxy-runner: the process an isolated group's library runs in ([groups.<name>] isolation = "process"). The
// host starts it with one socket as descriptor 3 and tells it what to load (runner.proto's Start); it loads the
// library with the host's own code (a GroupRuntime in process: the same loader, host table, call handles and
// budget), describes what the library registered, then runs the calls the host sends and sends their answers and
// its log lines back. It ends when the host says so, when the host goes (its socket closes, or the kernel's
// PR_SET_PDEATHSIG), or when the library crashes it, which is what it is for.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <utility>

#include "abi/library_scope.h"
#include "config/config.h"
#include "config/trusted_files.h"
#include "isolation/privileges.h"
#include "isolation/runner_protocol.h"
#include "isolation/spin_read.h"
#include "serving/group_runtime.h"
#include "serving/reaction_tail.h"

namespace csi_proxy::host {
namespace {

// Exit statuses the host reports ("exited with status N").
constexpr int kExitUsage = 64;       // wrong arguments: not started by the host
constexpr int kExitLostSocket = 70;  // the socket to the host failed (the library may have closed it)

// The socket to the host. Frames are written whole under one lock, from any thread.
class Link {
 public:
  explicit Link(int fd) : fd_(fd) {}

  // `ends_batch`: false for a frame that the dispatch's bookkeeping follows with one of its own, to go out with it.
  void Send(const runner_proto::RunnerMessage& message, bool ends_batch = true) {
    if (corked_) {
      // Answers of calls run inline while the reading thread takes a batch of calls: written together after it.
      AppendFrame(message, corked_frames_);
      // With no other whole call read, the batch ends here: out at once, before the dispatch's bookkeeping.
      if (ends_batch && !reader_.HasFrame()) Flush();
      return;
    }
    std::string frame;
    AppendFrame(message, frame);
    Write(frame);
  }

  // While corked, what the reading thread sends waits until Uncork, so that a batch of calls read at once is
  // answered with one write rather than one per call. The reader uncorks before it gives the reading up.
  void Cork() { corked_ = true; }
  void Uncork() {
    corked_ = false;
    Flush();
  }
  // From a fatal signal's handler: `bytes` in one send, unless a frame is being written (it would be torn).
  void SendFromSignalHandler(const char* bytes, size_t size) {
    if (!write_mu_.try_lock()) return;
    (void)!send(fd_, bytes, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    write_mu_.unlock();
  }
  // Whether the bytes received hold another whole message, which the next Receive returns without a read.
  bool HasMessage() const { return reader_.HasFrame(); }

  // The next message from the host; false when the host closed the socket. `soon`: the next call is likely to come
  // soon (the last one was answered inline, and nothing else runs), and the read spins (spin_read.h) for at most
  // kSpinBound before it sleeps, while recent spins found the next call within it.
  bool Receive(runner_proto::RunnerMessage& out, bool soon = false) {
    bool spin = soon && spin_gate_.Spin();
    for (;;) {
      auto next = reader_.Next(out);
      if (!next.ok()) std::_Exit(kExitLostSocket);
      if (*next) return true;
      constexpr size_t kRead = 64 * 1024;
      char* space = reader_.Space(kRead);
      ssize_t n = -1;
      if (std::exchange(spin, false)) {
        n = SpinRecv(fd_, space, kRead, std::chrono::steady_clock::now() + kSpinBound);
        const bool found = n >= 0 || errno != EAGAIN;
        spin_gate_.Spun(found);
        if (!found) n = SleepRecv(fd_, space, kRead);
      } else {
        n = SleepRecv(fd_, space, kRead);
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) std::_Exit(kExitLostSocket);
      if (n == 0) return false;
      reader_.Filled(static_cast<size_t>(n));
    }
  }

 private:
  void Write(const std::string& bytes) {
    std::lock_guard lock(write_mu_);
    size_t at = 0;
    while (at < bytes.size()) {
      ssize_t n = send(fd_, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) std::_Exit(kExitLostSocket);  // the host is gone, or the socket is: nothing left to serve
      at += static_cast<size_t>(n);
    }
  }

  void Flush() {
    if (!corked_frames_.empty()) Write(corked_frames_);
    corked_frames_.clear();
  }

  // How long the reading thread spins for the next call: about the time between an answer and the next call of a
  // client that calls back to back through the host (on a quiet machine); with many clients, the next call is
  // mostly there sooner.
  static constexpr std::chrono::microseconds kSpinBound{150};
  SpinGate spin_gate_;  // the reading thread's (the role's) only

  // Set only by the reading thread, and read only on it: other threads' sends are never corked.
  static thread_local bool corked_;
  std::string corked_frames_;  // the reading thread's only
  const int fd_;
  std::mutex write_mu_;
  FrameReader reader_;  // the reading thread's only
};

thread_local bool Link::corked_ = false;

// A crash of the library tells the host which of its code the thread ran (a Crashing message), so that the host's
// one line on the runner's end names it, as the host's own crash line does in process. Under AddressSanitizer its
// own handler reports the crash with far more.
#ifdef __SANITIZE_ADDRESS__
constexpr bool kTellCrashes = false;
#else
constexpr bool kTellCrashes = true;
#endif
Link* crash_link = nullptr;

// Async-signal-safe: the frame (a RunnerMessage holding a Crashing) is encoded by hand on the stack; with the work
// cut to 120 bytes every length is one byte. Then the signal's default action ends the runner (SA_RESETHAND).
void OnFatalSignal(int sig, siginfo_t*, void*) {
  const char* work = CurrentLibraryWork();
  if (work != nullptr && crash_link != nullptr) {
    constexpr uint8_t kCrashingField = (11 << 3) | 2, kWorkField = (1 << 3) | 2;
    const size_t size = strnlen(work, 120);
    char frame[4 + 4 + 120];
    frame[0] = static_cast<char>(4 + size);  // the frame's length, little-endian
    frame[1] = frame[2] = frame[3] = 0;
    frame[4] = static_cast<char>(kCrashingField);
    frame[5] = static_cast<char>(2 + size);
    frame[6] = static_cast<char>(kWorkField);
    frame[7] = static_cast<char>(size);
    std::memcpy(frame + 8, work, size);
    crash_link->SendFromSignalHandler(frame, 8 + size);
  }
  raise(sig);
}

void TellCrashes(Link* link) {
  if (!kTellCrashes) return;
  crash_link = link;
  struct sigaction crash {};
  crash.sa_sigaction = &OnFatalSignal;
  crash.sa_flags = SA_SIGINFO | SA_RESETHAND;
  sigemptyset(&crash.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGSYS}) sigaction(sig, &crash, nullptr);
}

// The runner's log goes to the host's: the library's host->log lines and the runner's own, at their levels.
class ForwardSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit ForwardSink(Link* link) : link_(link) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    constexpr size_t kMaxLine = 16 * 1024;
    runner_proto::RunnerMessage m;
    m.mutable_log()->set_level(static_cast<int>(msg.level));
    m.mutable_log()->set_text(std::string(msg.payload.data(), std::min(msg.payload.size(), kMaxLine)));
    link_->Send(m);
  }
  void flush_() override {}

 private:
  Link* link_;
};

// Set when a call was answered RESOURCE_EXHAUSTED, which may be the budget's refusal: the main thread then tells
// the host how many the budget refused (Usage).
std::atomic<bool> maybe_refused{false};

// Where a call's answer goes: a Completion frame. Deleted once it has answered (a call is answered once).
class RemoteAnswer final : public CallAnswerSink {
 public:
  RemoteAnswer(uint64_t id, Link* link, std::function<void(uint64_t)> forget)
      : id_(id), link_(link), forget_(std::move(forget)) {}
  // The host's handle logs the call's outcome.
  bool Relays() const override { return true; }
  void Answer(csi_proxy_status_code code, std::string_view message, std::string_view response) override {
    if (code == CSI_PROXY_STATUS_RESOURCE_EXHAUSTED) maybe_refused.store(true, std::memory_order_relaxed);
    forget_(id_);
    runner_proto::RunnerMessage m;
    runner_proto::Completion* c = m.mutable_completion();
    c->set_id(id_);
    c->set_code(code);
    c->set_message(std::string(message));
    c->set_response(std::string(response));
    // The budget's refusal goes out with the Usage that counts it (below, in the reading thread's dispatch): a
    // runner that ends as soon as the client saw the refusal has told the host of it.
    link_->Send(m, code != CSI_PROXY_STATUS_RESOURCE_EXHAUSTED);
    delete this;
  }

 private:
  const uint64_t id_;
  Link* link_;
  std::function<void(uint64_t)> forget_;
};

StatusOr<std::shared_ptr<GroupRuntime>> LoadGroup(const runner_proto::Start& start, const std::string& name) {
  if (start.allow_untrusted_files()) AllowUntrustedFiles();
  CSI_PROXY_ASSIGN_OR_RETURN(HostConfig config,
                             ParseConfig(start.config_toml(), start.source(), ExecutableDirectory()));
  config.check_only = start.check_only();
  if (config.groups.size() != 1 || config.groups[0].name != name) {
    return Status(Code::kInvalidArgument, "the runner of group '" + name + "' was handed another group's table");
  }
  GroupConfig& group = config.groups[0];
  group.isolation = Isolation::kInProcess;  // here it is
  group.key_lines.clear();
  for (const auto& [key, line] : start.key_lines()) group.key_lines[key] = line;
  // The process the filter keeps the group from signalling: the host, which is the runner's parent unless the host
  // is gone (then the kernel's PR_SET_PDEATHSIG ends the runner anyway).
  if (start.host_pid() <= 0 || start.host_pid() != getppid()) {
    return Status(Code::kFailedPrecondition, "the runner of group '" + name + "' was started by pid " +
                                                 std::to_string(getppid()) + ", not by the host (pid " +
                                                 std::to_string(start.host_pid()) + ")");
  }
  // What the group may do (isolation/privileges.h), before its library is loaded, so that not even its
  // constructors run with more; the runner is still single-threaded here.
  CSI_PROXY_RETURN_IF_ERROR(ApplyGroupPrivileges(group.privileges, static_cast<pid_t>(start.host_pid())));
  return GroupRuntime::Load(group, config, EndpointRegistry{});
}

runner_proto::RunnerMessage UsageOf(const GroupRuntime& runtime, uint64_t seq) {
  const GroupExecutor::Usage usage = runtime.usage().executor;
  runner_proto::RunnerMessage m;
  runner_proto::Usage* u = m.mutable_usage();
  u->set_seq(seq);
  u->set_running(usage.running);
  u->set_queued(usage.queued);
  u->set_refused(usage.refused);
  u->set_threads(usage.threads);
  return m;
}

runner_proto::RunnerMessage ReadyOf(const GroupRuntime& runtime) {
  runner_proto::RunnerMessage m;
  runner_proto::Ready* ready = m.mutable_ready();
  ready->set_protocol_version(kRunnerProtocolVersion);
  ready->set_plugin_version(runtime.plugin_version());
  ready->set_abi_version(runtime.abi_version());
  for (const auto& v : runtime.skipped_versions()) ready->add_skipped_versions(v);
  for (const auto& reg : runtime.services()) {
    runner_proto::Service* s = ready->add_services();
    s->set_version(reg.version);
    s->set_service_name(reg.service_name);
    for (const auto& [path, handler] : reg.methods) {
      runner_proto::Method* method = s->add_methods();
      method->set_path(path);
      method->set_flags(handler.flags);
    }
    for (const auto& fd : reg.file_descriptors) s->add_file_descriptors(fd);
  }
  return m;
}

int Serve(int fd, const std::string& name) {
  Link link(fd);
  TellCrashes(&link);
  auto logger = std::make_shared<spdlog::logger>("runner", std::make_shared<ForwardSink>(&link));
  spdlog::set_default_logger(logger);

  runner_proto::RunnerMessage m;
  if (!link.Receive(m) || !m.has_start()) return kExitLostSocket;
  const runner_proto::Start start = m.start();
  if (start.protocol_version() != kRunnerProtocolVersion) {
    runner_proto::RunnerMessage refused;
    refused.mutable_load_failed()->set_code(static_cast<int>(Code::kFailedPrecondition));
    refused.mutable_load_failed()->set_message("group '" + name + "': the runner speaks protocol version " +
                                               std::to_string(kRunnerProtocolVersion) + ", the host " +
                                               std::to_string(start.protocol_version()));
    link.Send(refused);
    return 0;
  }
  if (IsValidLogLevel(start.log_level())) spdlog::set_level(spdlog::level::from_str(start.log_level()));

  auto loaded = LoadGroup(start, name);
  if (!loaded.ok()) {
    runner_proto::RunnerMessage refused;
    refused.mutable_load_failed()->set_code(static_cast<int>(loaded.status().code()));
    refused.mutable_load_failed()->set_message(loaded.status().message());
    link.Send(refused);
    return 0;
  }
  std::shared_ptr<GroupRuntime> runtime = std::move(*loaded);
  // The method a call names by its index: the order Ready lists them in. Each is the runtime's own entry of its
  // endpoint, as the host's router hands it over: the runtime keeps what it learns of a method's runs (whether it
  // may borrow a thread) by the entry's address.
  std::vector<std::pair<std::string, const MethodHandler*>> methods;
  for (const auto& reg : runtime->services()) {
    const Endpoint* endpoint = nullptr;
    for (const auto& [_, e] : runtime->endpoints()) {
      if (e.version == reg.version) endpoint = &e;
    }
    for (const auto& [path, handler] : reg.methods) {
      auto it = endpoint != nullptr ? endpoint->methods.find(path) : decltype(endpoint->methods.end()){};
      methods.emplace_back(path, endpoint != nullptr && it != endpoint->methods.end() ? &it->second : &handler);
    }
  }
  link.Send(ReadyOf(*runtime));

  std::mutex calls_mu;
  std::unordered_map<uint64_t, std::weak_ptr<csi_proxy_host_call>> calls;  // for Cancel
  auto forget = [&](uint64_t id) {
    std::lock_guard lock(calls_mu);
    calls.erase(id);
  };
  uint64_t refused_told = 0;  // the budget's refusals the host was told of; read and written under reader_mu
  // Handles one message from the host.
  auto handle = [&](const runner_proto::RunnerMessage& m) {
    if (m.has_call()) {
      const runner_proto::Call& c = m.call();
      if (c.method() >= methods.size()) {
        RemoteAnswer(c.id(), &link, [](uint64_t) {}).Answer(CSI_PROXY_STATUS_UNIMPLEMENTED, "no such method", {});
        return;
      }
      const auto& [path, entry] = methods[c.method()];
      const MethodHandler& handler = *entry;
      CallInfo info;
      info.group = runtime->name();
      info.method = path;
      info.peer.pid = c.peer_pid();
      info.peer.uid = c.peer_uid();
      info.peer.gid = c.peer_gid();
      if (c.deadline_unix_ns() != INT64_MAX) {
        info.deadline =
            std::chrono::system_clock::time_point(std::chrono::duration_cast<std::chrono::system_clock::duration>(
                std::chrono::nanoseconds(c.deadline_unix_ns())));
      }
      auto call = std::make_shared<csi_proxy_host_call>(std::move(info), grpc::Slice(c.request()),
                                                        new RemoteAnswer(c.id(), &link, forget));
      {
        std::lock_guard lock(calls_mu);
        calls[c.id()] = call;
      }
      Status dispatched = runtime->Dispatch(handler, call);
      if (!dispatched.ok())
        call->Complete(static_cast<csi_proxy_status_code>(dispatched.code()), dispatched.message(), {});
      // The budget refuses on this thread, in Dispatch: told at once, so that a runner that ends loses none.
      if (maybe_refused.exchange(false, std::memory_order_relaxed)) {
        if (uint64_t refused = runtime->usage().executor.refused; refused != refused_told) {
          refused_told = refused;
          link.Send(UsageOf(*runtime, 0));
        }
      }
    } else if (m.has_log_level()) {
      if (IsValidLogLevel(m.log_level().level())) spdlog::set_level(spdlog::level::from_str(m.log_level().level()));
    } else if (m.has_usage_request()) {
      link.Send(UsageOf(*runtime, m.usage_request().seq()));
    } else if (m.has_cancel()) {
      std::shared_ptr<csi_proxy_host_call> call;
      {
        std::lock_guard lock(calls_mu);
        auto it = calls.find(m.cancel().id());
        if (it != calls.end()) call = it->second.lock();
      }
      // The host answered it already; the handler still completes it, and the host drops that answer.
      if (call) call->MarkCancelled();
    } else if (m.has_shutdown()) {
      link.Uncork();  // the answers of this batch's inline calls
      auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(m.shutdown().timeout_ms());
      std::vector<std::string> running = runtime->Stop(deadline);
      if (!running.empty()) spdlog::warn("[{}] the runner ends with calls still running: {}", name, running.size());
      spdlog::default_logger()->flush();
      std::_Exit(0);  // a handler still running must not see the process's destructors
    }
  };

  // The socket is read by one thread at a time, as gRPC's threads read the host's connections: the reader runs a
  // NONBLOCKING handler inline, and a call that may block where the host would (GroupRuntime::Dispatch: a method
  // that has run quickly of late, on the one borrowed thread, with an idle place in the budget) after it gave the
  // reading to the other thread, so that no hand-off to a worker stands between the call and its handler, and a
  // handler that hangs there holds no other call back: the other thread reads on, and sends the calls that may
  // block to the workers until the borrowed one returns.
  std::mutex reader_mu;
  std::thread follower;
  std::function<void()> read_loop = [&] {
    std::unique_lock reader(reader_mu);
    runner_proto::RunnerMessage message;
    bool soon = false;
    while (link.Receive(message, soon)) {
      ReactionTail tail;
      // Answers of this batch's inline calls go out in one write once no whole message is left to take.
      link.Cork();
      handle(message);
      soon = false;
      if (tail.free()) {
        if (!link.HasMessage()) link.Uncork();
        // A NONBLOCKING call, answered, with nothing else running: the reader spins for the next call before it
        // sleeps, since a reader still awake when it comes costs the host's sending thread no wake-up of this one
        // (docs/performance.md). Not while calls run on the workers, whose CPU the spin would take.
        if (message.has_call() && message.call().method() < methods.size() &&
            methods[message.call().method()].second->non_blocking()) {
          std::lock_guard lock(calls_mu);
          soon = calls.empty();
        }
        continue;
      }
      link.Uncork();
      try {
        if (!follower.joinable()) follower = std::thread(read_loop);
      } catch (const std::system_error& e) {
        // No thread to read meanwhile (max_tasks reached): the call runs with the reading held up, as inline.
        spdlog::warn("[{}] the runner's second reading thread could not start: {}", name, e.what());
        tail.Run();
        continue;
      }
      reader.unlock();
      tail.Run();
      reader.lock();
    }
    // The host closed the socket without a shutdown: it is gone, and nobody waits for an answer.
    std::_Exit(0);
  };
  read_loop();
  return 0;
}

}  // namespace
}  // namespace csi_proxy::host

int main(int argc, char** argv) {
  using namespace csi_proxy::host;
  prctl(PR_SET_NAME, "csi-proxy-run");  // the kernel names a process run from a descriptor by its number
  // The host stops its runners itself, after its calls drained: a stop sent to the whole service (systemd's
  // SIGTERM to the unit's processes) must not end them first. (A terminal's Ctrl-C does not reach them: each runs
  // in a process group of its own, never the terminal's foreground one.)
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) signal(sig, SIG_IGN);
  std::string group;
  int fd = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--group") group = argv[i + 1];
    if (flag == "--fd") fd = std::atoi(argv[i + 1]);
  }
  if (!IsValidGroupName(group) || fd != 3 || argc != 5) {
    std::fprintf(stderr, "csi-proxy-runner: started by the host for an isolated group; not to be run by hand\n");
    return kExitUsage;
  }
  return Serve(fd, group);
}

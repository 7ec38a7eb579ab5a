// Running a program on Linux: posix_spawn with an argv and a scrubbed environment; see run_program.h.
#include "run_program.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "csi_proxy/call_scope.hpp"

namespace csi_proxy::common {
namespace {

constexpr size_t kMaxOutput = 64 * 1024;

std::string Basename(const std::string& path) {
  auto pos = path.rfind('/');
  return pos == std::string::npos ? path : path.substr(pos + 1);
}

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

}  // namespace

StatusOr<std::string> FindSystemProgram(const std::string& name) {
  if (name.empty() || name.find('/') != std::string::npos) return InvalidArgument("bad program name: " + name);
  for (const char* dir : {"/usr/sbin", "/usr/bin", "/sbin", "/bin"}) {
    std::string candidate = std::string(dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return FailedPrecondition(name + " is not installed (looked in /usr/sbin, /usr/bin, /sbin, /bin)");
}

StatusOr<ProgramResult> RunProgram(const std::vector<std::string>& argv, const ProgramOptions& options) {
  if (argv.empty() || argv[0].empty() || argv[0][0] != '/') return Internal("RunProgram needs an absolute path");

  int out_pipe[2];
  int in_pipe[2] = {-1, -1};
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return Internal(Errno("pipe"));
  if (options.stdin_data && pipe2(in_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    return Internal(Errno("pipe"));
  }

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (options.stdin_data) {
    posix_spawn_file_actions_adddup2(&actions, in_pipe[0], STDIN_FILENO);
  } else {
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  }
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDERR_FILENO);

  // A fresh signal mask and default dispositions: the host blocks SIGTERM/SIGINT in its threads.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t empty_mask, default_signals;
  sigemptyset(&empty_mask);
  sigfillset(&default_signals);
  posix_spawnattr_setsigmask(&attr, &empty_mask);
  posix_spawnattr_setsigdefault(&attr, &default_signals);
  // Its own process group, so that a helper it starts (mount.cifs, iscsiadm's children) is stopped with it.
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);

  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_strings = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"};
  env_strings.insert(env_strings.end(), options.extra_env.begin(), options.extra_env.end());
  std::vector<char*> env;
  for (auto& e : env_strings) env.push_back(e.data());
  env.push_back(nullptr);

  pid_t pid = -1;
  int rc = posix_spawn(&pid, argv[0].c_str(), &actions, &attr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(out_pipe[1]);
  if (options.stdin_data) close(in_pipe[0]);
  if (rc != 0) {
    close(out_pipe[0]);
    if (options.stdin_data) close(in_pipe[1]);
    return Internal("cannot run " + argv[0] + ": " + std::strerror(rc));
  }

  if (options.stdin_data) {
    // Secrets are small. The host ignores SIGPIPE, so a program that never reads its stdin gives EPIPE here.
    const std::string& data = *options.stdin_data;
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = write(in_pipe[1], data.data() + off, data.size() - off);
      if (n <= 0 && errno != EINTR) break;
      if (n > 0) off += static_cast<size_t>(n);
    }
    close(in_pipe[1]);
  }

  ProgramResult result;
  auto deadline = std::chrono::steady_clock::now() + options.timeout;
  std::function<bool()> cancelled = options.cancelled ? options.cancelled : [] { return sdk::CallScope::Cancelled(); };
  enum class Stop { kNo, kTimeout, kCancelled } stop = Stop::kNo;
  auto should_stop = [&] {
    if (std::chrono::steady_clock::now() >= deadline) return Stop::kTimeout;
    return cancelled() ? Stop::kCancelled : Stop::kNo;
  };
  // Read until the output ends, then wait for the exit; both bounded by the deadline and the cancellation.
  char buf[4096];
  bool output_open = true;
  int wstatus = 0;
  for (;;) {
    if ((stop = should_stop()) != Stop::kNo) break;
    if (!output_open) {
      pid_t done = waitpid(pid, &wstatus, WNOHANG);
      if (done == pid || (done < 0 && errno != EINTR)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    pollfd pfd{out_pipe[0], POLLIN, 0};
    int pr = poll(&pfd, 1, 100);
    if (pr <= 0) continue;  // timeout (check again) or EINTR
    ssize_t n = read(out_pipe[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      output_open = false;
      continue;
    }
    if (result.output.size() < kMaxOutput) {
      result.output.append(buf, std::min(static_cast<size_t>(n), kMaxOutput - result.output.size()));
    }
  }
  close(out_pipe[0]);
  if (stop != Stop::kNo) {
    kill(-pid, SIGKILL);
    while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
  }
  if (stop == Stop::kTimeout) {
    return DeadlineExceeded(Basename(argv[0]) + " did not finish within " + std::to_string(options.timeout.count()) +
                            " ms and was killed");
  }
  if (stop == Stop::kCancelled) {
    return Status(Code::kCancelled, Basename(argv[0]) + " was stopped: the call was cancelled or its deadline passed");
  }
  if (WIFEXITED(wstatus)) {
    result.exit_code = WEXITSTATUS(wstatus);
  } else if (WIFSIGNALED(wstatus)) {
    result.term_signal = WTERMSIG(wstatus);
  }
  return result;
}

Status RunProgramChecked(const std::vector<std::string>& argv, const ProgramOptions& options) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto result, RunProgram(argv, options));
  if (result.exit_code == 0) return Status::Ok();
  std::string tail = result.output.size() > 2000 ? result.output.substr(result.output.size() - 2000) : result.output;
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' ')) tail.pop_back();
  std::string how = result.term_signal ? "was killed by signal " + std::to_string(result.term_signal)
                                       : "exited with status " + std::to_string(result.exit_code);
  return Internal(Basename(argv[0]) + " " + how + (tail.empty() ? "" : ": " + tail));
}

}  // namespace csi_proxy::common

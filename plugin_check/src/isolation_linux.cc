// The child process of a check on Linux: fork (the kit is single-threaded when it forks), a pipe for the reports, a
// shared page for the note, no core files, and death with the kit (PR_SET_PDEATHSIG).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <stdexcept>

#include "isolation.h"

namespace csi_proxy::plugin_check {
namespace {

void WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data += n;
    size -= static_cast<size_t>(n);
  }
}

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  const char* text = strsignal(sig);
  std::string name = abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
  return text != nullptr ? name + " (" + text + ")" : name;
}

}  // namespace

void SendLine(const ChildChannel& channel, const std::string& line) {
  std::string out = line + "\n";
  WriteAll(channel.report_fd, out.data(), out.size());
}

void SetNote(const ChildChannel& channel, const std::string& note) {
  const size_t n = std::min(note.size(), kNoteSize - 1);
  channel.note[n] = '\0';
  memcpy(channel.note, note.data(), n);
}

std::string ChildEnd::Describe() const {
  switch (kind) {
    case Kind::kExited:
      return "exited with status " + std::to_string(code);
    case Kind::kSignaled:
      return "was killed by " + SignalName(code);
    case Kind::kTimedOut:
      return "did not report in time and was killed";
  }
  return "ended";
}

ChildEnd RunInChild(const std::function<void(const ChildChannel&)>& body, const std::string& log_path,
                    Deadline first_deadline,
                    const std::function<void(const std::string& line, Deadline& deadline)>& on_line) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe2: ") + strerror(errno));
  void* page = mmap(nullptr, kNoteSize, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) throw std::runtime_error(std::string("mmap: ") + strerror(errno));
  char* note = static_cast<char*>(page);
  note[0] = '\0';
  std::fflush(stdout);  // what the kit printed must not be printed again by the child
  std::fflush(stderr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + strerror(errno));
  if (pid == 0) {
    close(fds[0]);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(120);
    const rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    // The library's crash is the child's death by its signal, also in a sanitizer build (whose handlers would turn
    // it into an exit status).
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL}) signal(sig, SIG_DFL);
    const int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    const int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (log < 0 || null < 0) _exit(121);
    dup2(null, STDIN_FILENO);
    dup2(log, STDOUT_FILENO);
    dup2(log, STDERR_FILENO);
    close(log);
    close(null);
    body(ChildChannel{fds[1], note});
    _exit(0);  // no static destructors: a library may still hold threads
  }
  close(fds[1]);
  ChildEnd end;
  Deadline deadline = first_deadline;
  std::string pending;
  bool open_pipe = true;
  int status = 0;
  for (;;) {
    if (open_pipe) {
      pollfd p{fds[0], POLLIN, 0};
      if (poll(&p, 1, 100) > 0) {
        char buf[4096];
        ssize_t n = read(fds[0], buf, sizeof buf);
        if (n > 0) {
          pending.append(buf, static_cast<size_t>(n));
          for (size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
            on_line(pending.substr(0, nl), deadline);
            pending.erase(0, nl + 1);
          }
        } else if (n == 0 || errno != EINTR) {
          open_pipe = false;  // the child's end is closed; it exits (a grandchild may still hold a copy)
        }
        continue;
      }
    } else {
      usleep(20000);
    }
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) {
      // Lines still in the pipe came before the exit.
      for (ssize_t n; open_pipe;) {
        char buf[4096];
        pollfd p{fds[0], POLLIN, 0};
        if (poll(&p, 1, 0) <= 0 || (n = read(fds[0], buf, sizeof buf)) <= 0) break;
        pending.append(buf, static_cast<size_t>(n));
      }
      for (size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
        on_line(pending.substr(0, nl), deadline);
        pending.erase(0, nl + 1);
      }
      if (WIFSIGNALED(status)) {
        end.kind = ChildEnd::Kind::kSignaled;
        end.code = WTERMSIG(status);
      } else {
        end.kind = ChildEnd::Kind::kExited;
        end.code = WEXITSTATUS(status);
      }
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      end.kind = ChildEnd::Kind::kTimedOut;
      break;
    }
  }
  close(fds[0]);
  end.note = std::string(note, strnlen(note, kNoteSize));
  munmap(page, kNoteSize);
  return end;
}

}  // namespace csi_proxy::plugin_check

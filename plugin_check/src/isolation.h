// Runs the kit's checks of a library in a child process, so that a crash, an abort or a hang of the library becomes
// a failed check instead of the kit's end. The only place that knows how the child is made
// (isolation_linux.cc). (The isolated checks, checks.h, serve the library from the host's own runner instead, which
// the host's RunnerSupervisor starts in the child.)
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace csi_proxy::plugin_check {

// What the child shares with the kit while it runs: the pipe it reports on and a note of what it is doing, which
// the kit still reads after the child died (the input a crash happened on).
struct ChildChannel {
  int report_fd = -1;
  char* note = nullptr;  // NUL-terminated, at most kNoteSize bytes with the NUL
};
inline constexpr size_t kNoteSize = 512;

// Writes one line (a '\n' is added) to the kit; lines are the child's reports (checks.h says their form).
void SendLine(const ChildChannel& channel, const std::string& line);
// Replaces the note.
void SetNote(const ChildChannel& channel, const std::string& note);

struct ChildEnd {
  enum class Kind { kExited, kSignaled, kTimedOut } kind = Kind::kExited;
  int code = 0;      // the exit status or the signal
  std::string note;  // the child's last note
  // "was killed by SIGSEGV (Segmentation fault)", "exited with status 3", "was killed: no report within 12 s".
  std::string Describe() const;
};

// Forks a child that runs `body` (its standard output and error go to `log_path`) and then exits. The kit reads the
// child's lines as they come: `on_line` gets each and may move the deadline, by which the child must have written
// its next line or exited, or be killed (SIGKILL, by its process id).
using Deadline = std::chrono::steady_clock::time_point;
ChildEnd RunInChild(const std::function<void(const ChildChannel&)>& body, const std::string& log_path,
                    Deadline first_deadline,
                    const std::function<void(const std::string& line, Deadline& deadline)>& on_line);

}  // namespace csi_proxy::plugin_check

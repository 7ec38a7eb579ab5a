// Runs an external program the safe way: an absolute path, an argv (never a shell), a scrubbed environment,
// stdin from /dev/null or a given buffer, output captured, and a time limit. The interface is the same on every
// system; the Linux implementation is run_program_linux.cc.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "csi_proxy/status.hpp"

namespace csi_proxy::common {

struct ProgramResult {
  int exit_code = -1;   // the exit status; -1 when killed by a signal
  int term_signal = 0;  // the signal that ended it, 0 if it exited
  std::string output;   // stdout and stderr, interleaved, truncated at 64 KiB
};

struct ProgramOptions {
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  // Checked while the program runs; once true the program (and what it started) is killed and the run fails
  // with CANCELLED. By default: the cancellation of the call the current thread handles (sdk::CallScope).
  std::function<bool()> cancelled;
  std::optional<std::string> stdin_data;  // written to the program's stdin (e.g. a secret), never argv
  std::vector<std::string> extra_env;     // "KEY=value" entries added to the scrubbed environment
};

// Finds `name` in the fixed system directories (/usr/sbin, /usr/bin, /sbin, /bin), never in $PATH.
StatusOr<std::string> FindSystemProgram(const std::string& name);

// Runs argv[0] (an absolute path) with argv. The environment is only PATH=/usr/sbin:/usr/bin:/sbin:/bin,
// LC_ALL=C and `extra_env`. The program runs in a process group of its own. Fails with INTERNAL if it cannot
// start, DEADLINE_EXCEEDED on timeout and CANCELLED when `cancelled` says so (the whole group is killed, and the
// wait for it is bounded too). A non-zero exit is not an error here: callers judge `exit_code`.
StatusOr<ProgramResult> RunProgram(const std::vector<std::string>& argv, const ProgramOptions& options = {});

// RunProgram, then turns a non-zero exit into INTERNAL with the program's name and the tail of its output.
Status RunProgramChecked(const std::vector<std::string>& argv, const ProgramOptions& options = {});

}  // namespace csi_proxy::common

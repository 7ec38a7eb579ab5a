// Isolation is not built for Windows yet (docs/windows.md says what it would take: a job object, a restricted
// token, a pipe pair): a group configured with isolation = "process" is refused with that sentence.
#include "isolation/runner_supervisor.h"

namespace csi_proxy::host {

std::string RunnerSupervisor::RunnerPath() { return ExecutableDirectory() + "\\csi-proxy-runner.exe"; }

StatusOr<std::unique_ptr<RunnerSupervisor>> RunnerSupervisor::Start(const GroupConfig& group, const HostConfig&,
                                                                    std::chrono::steady_clock::time_point) {
  return Status(Code::kUnimplemented, "group '" + group.name + "' (" + group.library +
                                          "): isolation = \"process\" is not built for Windows yet (docs/windows.md); "
                                          "serve the group in process");
}

}  // namespace csi_proxy::host

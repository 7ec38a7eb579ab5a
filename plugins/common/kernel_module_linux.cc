// Loading kernel modules; see kernel_module_linux.h.
#include "kernel_module_linux.h"

#include <sys/stat.h>
#include <sys/utsname.h>

#include <sstream>

#include "read_file_linux.h"
#include "run_program.h"
#include "text.h"

namespace csi_proxy::common {
namespace {

// Whether the running kernel could load `module`: nullopt if yes, else why not.
std::optional<std::string> LoadableModuleProblem(const std::string& module) {
  struct stat st;
  if (stat("/proc/modules", &st) != 0) {
    return "the kernel was built without loadable module support (there is no /proc/modules), so `modprobe " + module +
           "` cannot help";
  }
  utsname u;
  if (uname(&u) != 0) return "uname failed";
  std::string dir = std::string("/lib/modules/") + u.release;
  auto deps = ReadWholeFile(dir + "/modules.dep", {.max_bytes = 64u << 20});
  if (!deps.ok()) return "there is no " + dir + "/modules.dep, so `modprobe " + module + "` cannot help";
  if (deps->find("/" + module + ".ko") == std::string::npos) {
    return "kernel " + std::string(u.release) + " has no " + module + " module in " + dir;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> LoadKernelModule(const std::string& module, const std::function<bool()>& present) {
  if (present()) return std::nullopt;
  if (auto problem = LoadableModuleProblem(module)) return problem;
  auto modprobe = FindSystemProgram("modprobe");
  if (!modprobe.ok()) return "modprobe is not installed";
  auto result = RunProgram({*modprobe, module});
  if (result.ok() && result->exit_code == 0 && present()) return std::nullopt;
  return "modprobe " + module + " failed" + (result.ok() ? ": " + OutputTail(result->output) : "");
}

}  // namespace csi_proxy::common

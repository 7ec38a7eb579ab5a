// See default_paths.h: the Linux conventions (FHS).
#include "config/default_paths.h"

#include <filesystem>
#include <system_error>

namespace csi_proxy::host {

namespace fs = std::filesystem;

OperatingSystem ThisSystem() { return OperatingSystem::kLinux; }

bool IsAbsolutePath(const std::string& path) { return fs::path(path).is_absolute(); }

std::string ExecutableDirectory() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

std::string DefaultConfigPath(const std::string& executable_dir) {
  fs::path prefix = fs::path(executable_dir).parent_path();
  fs::path etc = prefix == "/usr" ? fs::path("/etc") : prefix / "etc";
  return (etc / "csi-proxy" / "csi-proxy.toml").string();
}

std::string DefaultPluginDir(const std::string& executable_dir) {
  std::string dir = (fs::path(executable_dir) / ".." / "lib" / "csi-proxy" / "plugins").lexically_normal();
  if (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

std::string DefaultEndpointDir() { return "/run/csi-proxy"; }
std::string DefaultKubeletPath() { return "/var/lib/kubelet"; }
std::string DefaultStateDir() { return "/var/lib/csi-proxy"; }

std::string DefaultAdminSocket(const std::string& endpoint_dir) {
  std::string dir = endpoint_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir + "-admin.sock";
}

std::string EndpointPath(const std::string& endpoint_dir, const std::string& name) { return endpoint_dir + "/" + name; }

std::string DefaultPipeSecurity() { return ""; }  // no pipes on Linux: pipe_sddl is a Windows key

std::string GroupLibraryFileName(const std::string& name) { return "libcsi-proxy-" + name + ".so"; }

}  // namespace csi_proxy::host

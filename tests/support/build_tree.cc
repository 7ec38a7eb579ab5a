// See build_tree.h.
#include "build_tree.h"

#include <filesystem>

namespace csi_proxy::testing {

std::string BuildDir() { return CSI_PROXY_BUILD_DIR; }
std::string SourceDir() { return CSI_PROXY_SOURCE_DIR; }
std::string HostBinary() { return BuildDir() + "/bin/csi-proxy"; }
std::string PluginDir() { return BuildDir() + "/lib/csi-proxy/plugins"; }

std::string GroupLibrary(const std::string& group) {
  std::string path = PluginDir() + "/libcsi-proxy-" + group + ".so";
  return std::filesystem::exists(path) ? path : std::string();
}

std::string RepoRelative(const std::string& path) {
  std::string root = SourceDir() + "/";
  return path.rfind(root, 0) == 0 ? path.substr(root.size()) : path;
}

const std::vector<std::string>& AllGroups() {
  static const std::vector<std::string> groups = {"filesystem", "disk", "volume", "smb", "system", "iscsi"};
  return groups;
}

}  // namespace csi_proxy::testing

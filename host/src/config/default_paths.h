// Where the host looks for things when the configuration does not say: the operating system's conventions
// (default_paths_linux.cc, default_paths_windows.cc).
#pragma once

#include <string>

namespace csi_proxy::host {

// The system this build of the host runs on, for the few facts that are data rather than code (which [host] keys
// have a meaning).
enum class OperatingSystem { kLinux, kWindows };
OperatingSystem ThisSystem();

// Whether `path` is absolute as the system reads paths: on Windows also a device path such as \\.\pipe\<name>.
bool IsAbsolutePath(const std::string& path);

// The directory of the running executable, which anchors the configuration and plugin directory of an installed
// tree.
std::string ExecutableDirectory();

// The configuration of an installed tree when no --config is given: <prefix>/etc/csi-proxy/csi-proxy.toml, where
// <prefix> is the executable's parent directory; a /usr install keeps it in /etc (where `cmake --install --prefix
// /usr` and the .deb put it). On Windows csi-proxy.toml beside the executable, as the release zip lays it out.
std::string DefaultConfigPath(const std::string& executable_dir);

// [host] plugin_dir when unset: ../lib/csi-proxy/plugins beside the executable; on Windows the executable's own
// directory.
std::string DefaultPluginDir(const std::string& executable_dir);

// [host] endpoint_dir, kubelet_path and state_dir when unset.
std::string DefaultEndpointDir();
std::string DefaultKubeletPath();
std::string DefaultStateDir();

// [host] admin_socket when unset: beside the endpoint directory, never in it (<endpoint_dir>-admin.sock); on
// Windows the pipe \\.\pipe\csi-proxy-admin.
std::string DefaultAdminSocket(const std::string& endpoint_dir);

// Where endpoint `name` (csi-proxy-<group>-<version>) is served: <endpoint_dir>/<name>; on Windows the pipe
// \\.\pipe\<name>.
std::string EndpointPath(const std::string& endpoint_dir, const std::string& name);

// [host] pipe_sddl when unset (Windows): who may open the endpoint pipes.
std::string DefaultPipeSecurity();

// The file name of group `name`'s library in plugin_dir: libcsi-proxy-<name>.so; csi-proxy-<name>.dll on Windows.
std::string GroupLibraryFileName(const std::string& name);

}  // namespace csi_proxy::host

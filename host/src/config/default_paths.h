// Where the host looks for things when the configuration does not say: the operating system's conventions
// (default_paths_linux.cc; a Windows side goes beside it as default_paths_windows.cc).
#pragma once

#include <string>

namespace csi_proxy::host {

// The directory of the running executable, which anchors the configuration and plugin directory of an installed
// tree.
std::string ExecutableDirectory();

// The configuration of an installed tree when no --config is given: <prefix>/etc/csi-proxy/csi-proxy.toml, where
// <prefix> is the executable's parent directory; a /usr install keeps it in /etc (where `cmake --install --prefix
// /usr` and the .deb put it).
std::string DefaultConfigPath(const std::string& executable_dir);

// [host] plugin_dir when unset: ../lib/csi-proxy/plugins beside the executable.
std::string DefaultPluginDir(const std::string& executable_dir);

// [host] endpoint_dir, kubelet_path and state_dir when unset.
std::string DefaultEndpointDir();
std::string DefaultKubeletPath();
std::string DefaultStateDir();

// [host] admin_socket when unset: beside the endpoint directory, never in it (<endpoint_dir>-admin.sock).
std::string DefaultAdminSocket(const std::string& endpoint_dir);

// The file name of group `name`'s library in plugin_dir: libcsi-proxy-<name>.so.
std::string GroupLibraryFileName(const std::string& name);

}  // namespace csi_proxy::host

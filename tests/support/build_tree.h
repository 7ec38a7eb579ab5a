// The build tree the tests and benchmarks run from, and the source tree it was configured from (compiled in).
#pragma once

#include <string>
#include <vector>

namespace csi_proxy::testing {

std::string BuildDir();
std::string SourceDir();
std::string HostBinary();  // <build>/bin/csi-proxy
std::string PluginDir();   // <build>/lib/csi-proxy/plugins
// <build>/lib/csi-proxy/plugins/libcsi-proxy-<group>.so, or "" if that file does not exist.
std::string GroupLibrary(const std::string& group);

// `path` relative to the source tree when it lies inside it (for notes in a committed report).
std::string RepoRelative(const std::string& path);

// The API groups of the project, in upstream's registration order.
const std::vector<std::string>& AllGroups();

}  // namespace csi_proxy::testing

// The real csi-proxy host, started for a benchmark from the build tree with a configuration of its own.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "child_process.h"
#include "csi_proxy/status.hpp"
#include "scratch.h"

namespace csi_proxy::bench {

// Paths of the build tree (compiled in).
std::string BuildDir();
std::string SourceDir();
std::string HostBinary();  // <build>/bin/csi-proxy
std::string PluginDir();   // <build>/lib/csi-proxy/plugins
// <build>/lib/csi-proxy/plugins/libcsi-proxy-<group>.so, or "" if that file does not exist.
std::string GroupLibrary(const std::string& group);

// `path` relative to the source tree when it lies inside it (for notes in the committed report).
std::string RepoRelative(const std::string& path);

// The API groups of the project, in upstream's registration order.
const std::vector<std::string>& AllGroups();

struct EndpointInfo {
  std::string name;  // csi-proxy-<group>-<version>
  std::string group;
  std::string version;
};

class BenchHost {
 public:
  // `groups` are enabled with their default settings; `host_keys` are extra lines for [host]; `extra_toml` is
  // appended as it is (tables of further groups, e.g. one whose library the benchmark built itself). Endpoints,
  // kubelet tree and state live in a scratch directory.
  BenchHost(const std::vector<std::string>& groups, const std::string& host_keys = "",
            const std::string& extra_toml = "");
  ~BenchHost();

  // What the configuration would serve (csi-proxy --check-config), and the refusals it reports.
  StatusOr<std::vector<EndpointInfo>> CheckConfig(std::vector<std::string>* refusals = nullptr);

  // Starts the host and waits until every endpoint in `endpoints` answers a gRPC call. Returns the time from
  // just before exec to that moment.
  StatusOr<std::chrono::nanoseconds> Start(const std::vector<std::string>& endpoints,
                                           std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // SIGTERM and wait; returns the time until the process was gone (or an error if it had to be killed).
  StatusOr<std::chrono::nanoseconds> Stop();

  // Writes the configuration again with `extra_toml` in place of the one before, as an admin does before a
  // reload: beside the file, then renamed over it, so that the host never reads half a file.
  Status RewriteConfig(const std::string& extra_toml);

  pid_t pid() const { return process_.pid(); }
  const std::string& dir() const { return scratch_.path(); }
  std::string endpoint(const std::string& name) const { return scratch_.path() + "/endpoints/" + name; }
  std::string kubelet_dir() const { return scratch_.path() + "/kubelet"; }
  std::string log() const;
  std::string log_path() const { return scratch_.Sub("host.log"); }
  // The admin socket (the host's default: <endpoint_dir>-admin.sock).
  std::string admin_socket() const { return scratch_.Sub("endpoints-admin.sock"); }

 private:
  ScratchDir scratch_;
  std::string ConfigText(const std::string& extra_toml) const;

  std::vector<std::string> groups_;
  std::string host_keys_;
  std::string config_path_;
  ChildProcess process_;
  int runs_ = 0;
};

}  // namespace csi_proxy::bench

// The real csi-proxy host as a benchmark runs it: the tests' HostProcess (tests/support/host_process.h), with the
// groups enabled by name and what a benchmark measures: how long the start and the stop take, and what
// --check-config says would be served.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "csi_proxy/status.hpp"
#include "host_process.h"

namespace csi_proxy::bench {

struct EndpointInfo {
  std::string name;  // csi-proxy-<group>-<version>
  std::string group;
  std::string version;
};

class BenchHost {
 public:
  // `groups` are enabled with their default settings; `host_keys` are extra lines for [host]; `extra_toml` is
  // appended as it is (tables of further groups, e.g. one whose library the benchmark built itself). Endpoints,
  // kubelet tree and state live in the host's temporary directory. Unless `host_keys` say otherwise, the host
  // logs at level info and gives calls 5 s at a stop. `binary`: another build of csi-proxy than the tree's.
  BenchHost(const std::vector<std::string>& groups, const std::string& host_keys = "",
            const std::string& extra_toml = "", const std::string& binary = "");
  ~BenchHost();

  // What the configuration would serve (csi-proxy --check-config), and the refusals it reports.
  StatusOr<std::vector<EndpointInfo>> CheckConfig(std::vector<std::string>* refusals = nullptr);

  // Starts the host and waits until every endpoint in `endpoints` answers a gRPC call. Returns the time from
  // just before exec to the moment every endpoint spoke HTTP/2.
  StatusOr<std::chrono::nanoseconds> Start(const std::vector<std::string>& endpoints,
                                           std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // SIGTERM and wait; returns the time until the process was gone (or an error if it had to be killed).
  StatusOr<std::chrono::nanoseconds> Stop();

  // Writes the configuration again with `extra_toml` in place of the one before, as an admin does before a
  // reload: beside the file, then renamed over it, so that the host never reads half a file.
  Status RewriteConfig(const std::string& extra_toml);

  pid_t pid() const { return host_.pid(); }
  const std::string& dir() const { return host_.dir(); }
  std::string endpoint(const std::string& name) const { return host_.endpoint(name); }
  std::string kubelet_dir() const { return host_.kubelet_dir(); }
  std::string log() const { return host_.log(); }
  std::string log_path() const { return host_.log_path(); }
  std::string admin_socket() const { return host_.admin_socket(); }

 private:
  std::string GroupTables(const std::string& extra_toml) const;

  std::vector<std::string> groups_;
  std::string host_keys_;
  testing::HostProcess host_;
};

}  // namespace csi_proxy::bench

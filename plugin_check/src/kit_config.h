// What the kit runs a library with: the host's settings and the group's keys (the file given with --config, read
// by the host's own configuration parser), and the kit's own [check] table.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "config/config.h"
#include "csi_proxy/status.hpp"

namespace csi_proxy::plugin_check {

struct KitConfig {
  host::HostConfig host;    // kubelet_path and state_dir in the kit's scratch directory unless the file sets them
  host::GroupConfig group;  // the group's table, with library = the library under test
  // [check]
  bool fuzz_mutating = false;                     // fuzz methods without CSI_PROXY_METHOD_READ_ONLY too
  std::map<std::string, std::string> skip;        // method path -> why it is never called
  std::set<std::string> read_only_methods;        // called concurrently though the library does not flag them
  std::map<std::string, std::string> requests;    // method path -> a request in protobuf text format
  int reloads = 10;                               // reloads of the leak checks
  int64_t rss_growth_limit_bytes = 16 << 20;      // what N reloads may leave resident
  std::chrono::milliseconds call_timeout{10000};  // how long one call may take
  int threads = 8;                                // concurrent callers of a read-only method
  int calls_per_thread = 50;
};

// Reads `config_path` (may be empty: no keys) for the library `library`. The group is `group_name`, else the one
// [groups.<name>] table of the file, else the name in the library's file name (libcsi-proxy-<name>.so).
// `scratch_dir` (created by the caller) holds the kubelet and state directories the file does not set.
StatusOr<KitConfig> LoadKitConfig(const std::string& library, const std::string& config_path,
                                  const std::string& group_name, const std::string& scratch_dir);

}  // namespace csi_proxy::plugin_check

// The host's TOML configuration: the [host] table and one [groups.<name>] table per API group.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

#include "config/access_lists.h"
#include "config/default_paths.h"
#include "config/group_privileges.h"
#include "csi_proxy/plugin_abi.h"
#include "csi_proxy/status.hpp"

namespace csi_proxy::host {

// Where a group's library runs: in the host's process, or in a runner process of its own (host/runner/).
enum class Isolation { kInProcess, kProcess };
const char* IsolationName(Isolation isolation);

struct GroupConfig {
  std::string name;    // the table name in [groups.<name>]
  std::string source;  // the configuration file, for messages
  bool enabled = true;
  bool required = false;              // a group that cannot be loaded stops the host instead of being skipped
  std::string library;                // absolute path of the group library
  std::vector<std::string> versions;  // versions to serve; empty means every version the library offers
  int workers = 0;                    // handlers of this group that may run at once; 0: [host] workers
  int max_queued_calls = 64;          // calls that may wait for a worker; more are refused (RESOURCE_EXHAUSTED)
  int max_request_bytes = 64 * 1024;  // the largest request accepted; the API's requests are paths and names
  AccessLists access;                 // the lists this table gives; see MergeAccessLists for the rest
  toml::table settings;               // the group's own keys, handed to the library as they are
  Isolation isolation = Isolation::kInProcess;
  // An isolated group whose runner ended more than restart_limit times within restart_window_seconds is marked
  // failed (until a reload); one whose call is still running hang_restart_seconds past its deadline has its
  // runner killed and restarted (0: never).
  int restart_limit = 5;
  int restart_window_seconds = 60;
  int hang_restart_seconds = 10;
  toml::table table;                     // the whole table as written: an isolated group's runner parses it again
  std::map<std::string, int> key_lines;  // the line of each of those keys in `source`, for messages

  // What the group's runner may do: the defaults for its table name (DefaultGroupPrivileges), key by key replaced
  // by the table's capabilities, user, group, max_memory_bytes, max_open_files and max_tasks.
  GroupPrivileges privileges;
  // The first of those keys the table sets ("groups.disk.capabilities") and its line; empty when it sets none.
  // Such a table asks for its group to be confined, which only a runner does (RefuseUnappliedPrivileges).
  std::string privilege_key;
  int privilege_key_line = 0;
};

struct HostConfig {
  std::string endpoint_dir = DefaultEndpointDir();
  std::string admin_socket;  // the root-only admin socket; default <endpoint_dir>-admin.sock, beside the directory
  std::string plugin_dir;    // absolute; defaults to ../lib/csi-proxy/plugins beside the executable
  std::string kubelet_path = DefaultKubeletPath();
  std::vector<std::string> working_dirs;
  std::string state_dir = DefaultStateDir();
  std::string log_level = "info";
  std::string log_format = "text";  // "text" or "json" (JSON lines), for the log and the audit log
  std::string audit_log;            // an absolute file path, "-" (standard error) or empty (no audit log)
  // When the audit log's queue is full: "drop" loses (and counts) lines, "refuse" refuses mutating calls.
  std::string audit_log_overflow = "drop";
  int workers = 16;  // the default budget of each group (see GroupConfig::workers)
  uint32_t socket_mode = 0660;
  std::string socket_group;  // a group name or numeric gid; empty leaves the socket's group as created
  std::string pipe_sddl = DefaultPipeSecurity();  // Windows: the endpoint pipes' security descriptor
  std::chrono::milliseconds shutdown_timeout{std::chrono::seconds(30)};
  // How long loading a group's library and its init may take, at a start or a reload.
  std::chrono::seconds load_timeout{30};
  int max_connections = 4096;            // open connections in all (also bounded by the open-file limit)
  int max_connections_per_uid = 0;       // for one caller's uid; 0: a quarter of max_connections
  int max_connections_per_endpoint = 0;  // on one endpoint socket; 0: half of max_connections
  int max_connections_unlisted = 0;      // of callers in no group's lists, together; 0: an eighth of max_connections
  // A connection must have sent the HTTP/2 client preface within this time, and one without a call for
  // idle_timeout is closed (the client reconnects for its next call).
  std::chrono::seconds handshake_timeout{10};
  std::chrono::seconds idle_timeout{300};
  // HTTP/2 streams (calls, health checks and watches, reflection sessions) open at once: on one connection (also
  // advertised to clients), of one uid, in all, and health watches in all; a stream's request message must
  // arrive within request_timeout of its HEADERS.
  int max_streams_per_connection = 100;
  int max_streams_per_uid = 1000;
  int max_streams = 4000;
  int max_health_watches = 1000;
  std::chrono::seconds request_timeout{10};
  AccessLists access;  // who may call every group's methods, unless its table says otherwise
  // Check every call against the process that connected (SO_PEERPIDFD): refused once it has exited or changed
  // its credentials, as when its socket was passed to or inherited by another process.
  bool check_caller_process = false;
  std::string metrics_address;      // IP:PORT of the Prometheus listener; empty: no metrics
  std::vector<GroupConfig> groups;  // sorted by name
  // Not a key: the groups are loaded for --check-config, and told so (CSI_PROXY_INIT_CHECK_ONLY) so that they
  // change nothing beside a host that may serve this configuration.
  bool check_only = false;
};

// Reads and validates a configuration file, opened and read through the trusted-file checks
// (config/trusted_files.h). `executable_dir` anchors the default plugin_dir. Errors name the file, the key and
// the line.
StatusOr<HostConfig> LoadConfig(const std::string& path, const std::string& executable_dir);
inline constexpr size_t kMaxConfigBytes = 4 * 1024 * 1024;

// The same, from text (tests and --check-config use it); `source_name` appears in error messages.
StatusOr<HostConfig> ParseConfig(std::string_view text, const std::string& source_name,
                                 const std::string& executable_dir);

// The one syntax of a group name, for [groups.<name>] and for the group a library answers (plugin_abi.h,
// "Group names"): 1 to CSI_PROXY_GROUP_NAME_MAX lowercase letters and digits, starting with a letter.
bool IsValidGroupName(std::string_view name);
inline constexpr const char* kGroupNameRule =
    "a valid group name (lowercase letters and digits, starting with a letter, at most 32 characters)";
static_assert(CSI_PROXY_GROUP_NAME_MAX == 32, "kGroupNameRule states the limit");

// Refuses a group table that sets a privilege key although its group is not `isolated` (it runs in the host's
// process, with the host's privileges): a confinement written down but not applied would mislead its reader.
// The error names the key and its line. OK for a table that sets none of them, or for an isolated group.
Status RefuseUnappliedPrivileges(const GroupConfig& group, bool isolated);

// The keys of a [groups.<name>] table that the host consumes (the library never sees them).
const std::vector<std::string>& GroupHostKeys();

// IP:PORT: an IPv4 address or a bracketed IPv6 address, and a port from 1 to 65535.
bool IsValidMetricsAddress(const std::string& address);

// The levels --log-level and [host] log_level accept.
bool IsValidLogLevel(const std::string& level);

}  // namespace csi_proxy::host

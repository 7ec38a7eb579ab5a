// What an isolated group's runner may do once it has confined itself: the privilege keys of a [groups.<name>]
// table as data, the shipped groups' defaults, the system calls no group may make, and the one-line description
// `csi-proxyctl status` shows. Applying them is isolation/privileges.h's job; this part is the same on every system.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/system_accounts.h"

namespace csi_proxy::host {

struct GroupPrivileges {
  // Linux capability numbers (CAP_SYS_ADMIN is 21), sorted and unique: the runner's effective, permitted,
  // inheritable and ambient sets, and its bounding set; every other capability is gone for good.
  std::vector<int> capabilities;
  // The account the runner switches to; unset: it stays root. `group` unset with `user` set is the user's primary
  // group (resolved when the configuration is read). Supplementary groups are always dropped.
  std::optional<AccountId> user;
  std::optional<AccountId> group;
  std::string user_name;   // as the configuration wrote it, for the description
  std::string group_name;  // likewise; empty when the group came from the user's entry
  // Resource limits; 0 leaves the host's own limit. Memory is RLIMIT_DATA (private writable memory: heap,
  // anonymous mappings, thread stacks), open files RLIMIT_NOFILE, tasks RLIMIT_NPROC (see docs/configuration.md:
  // counted per user, and not enforced for root).
  uint64_t max_memory_bytes = 0;
  uint64_t max_open_files = 0;
  uint64_t max_tasks = 0;

  bool operator==(const GroupPrivileges&) const = default;
};

// The capability `name` ("CAP_SYS_ADMIN") as its number; nullopt for a name this table does not know.
std::optional<int> CapabilityFromName(std::string_view name);
// "CAP_SYS_ADMIN" for 21; "CAP_<n>" for a number the table does not name.
std::string CapabilityName(int capability);
// The highest capability number the table names (CAP_CHECKPOINT_RESTORE, Linux 5.9).
int LastNamedCapability();

// The privileges of a group that sets none of the keys, by its table name: the six shipped groups' own
// (docs/configuration.md says why each needs what it has), and for any other name no capability at all, as root,
// with the same limits.
GroupPrivileges DefaultGroupPrivileges(std::string_view table_name);

// The system calls the runner's filter refuses with EPERM, by their names in the kernel's table: what no group
// needs (kexec, module loading, reboot, swap, ptrace and reading or writing other processes' memory, BPF, perf
// events, the clock, raw I/O ports, obsolete calls). A name the running architecture lacks is skipped there.
const std::vector<std::string_view>& RefusedSystemCalls();

// One line for `csi-proxyctl status`: "capabilities: CAP_SYS_RAWIO,CAP_SYS_ADMIN; user: root; no_new_privs;
// seccomp: 42 system calls refused, signals to the host refused (EPERM); limits: memory 1024 MiB, open files 4096,
// tasks 512". The signals are privileges.h's: to the host, its process group and every process at once, and tkill.
std::string DescribePrivileges(const GroupPrivileges& privileges);

}  // namespace csi_proxy::host

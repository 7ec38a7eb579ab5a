// See group_privileges.h.
#include "config/group_privileges.h"

#include <algorithm>
#include <array>

namespace csi_proxy::host {
namespace {

// The kernel's numbering (include/uapi/linux/capability.h); a name's index is its number. Kept here rather than
// asked of libcap so that the configuration reads the same on every system (tests compare it with libcap's).
constexpr std::array<std::string_view, 41> kCapabilityNames = {"CAP_CHOWN",
                                                               "CAP_DAC_OVERRIDE",
                                                               "CAP_DAC_READ_SEARCH",
                                                               "CAP_FOWNER",
                                                               "CAP_FSETID",
                                                               "CAP_KILL",
                                                               "CAP_SETGID",
                                                               "CAP_SETUID",
                                                               "CAP_SETPCAP",
                                                               "CAP_LINUX_IMMUTABLE",
                                                               "CAP_NET_BIND_SERVICE",
                                                               "CAP_NET_BROADCAST",
                                                               "CAP_NET_ADMIN",
                                                               "CAP_NET_RAW",
                                                               "CAP_IPC_LOCK",
                                                               "CAP_IPC_OWNER",
                                                               "CAP_SYS_MODULE",
                                                               "CAP_SYS_RAWIO",
                                                               "CAP_SYS_CHROOT",
                                                               "CAP_SYS_PTRACE",
                                                               "CAP_SYS_PACCT",
                                                               "CAP_SYS_ADMIN",
                                                               "CAP_SYS_BOOT",
                                                               "CAP_SYS_NICE",
                                                               "CAP_SYS_RESOURCE",
                                                               "CAP_SYS_TIME",
                                                               "CAP_SYS_TTY_CONFIG",
                                                               "CAP_MKNOD",
                                                               "CAP_LEASE",
                                                               "CAP_AUDIT_WRITE",
                                                               "CAP_AUDIT_CONTROL",
                                                               "CAP_SETFCAP",
                                                               "CAP_MAC_OVERRIDE",
                                                               "CAP_MAC_ADMIN",
                                                               "CAP_SYSLOG",
                                                               "CAP_WAKE_ALARM",
                                                               "CAP_BLOCK_SUSPEND",
                                                               "CAP_AUDIT_READ",
                                                               "CAP_PERFMON",
                                                               "CAP_BPF",
                                                               "CAP_CHECKPOINT_RESTORE"};

std::vector<int> Capabilities(const std::vector<std::string_view>& names) {
  std::vector<int> out;
  for (std::string_view name : names) out.push_back(*CapabilityFromName(name));
  std::sort(out.begin(), out.end());
  return out;
}

constexpr uint64_t kMiB = 1024 * 1024;

GroupPrivileges Privileges(const std::vector<std::string_view>& capabilities, uint64_t memory_mib) {
  GroupPrivileges p;
  p.capabilities = Capabilities(capabilities);
  p.max_memory_bytes = memory_mib * kMiB;
  p.max_open_files = 4096;
  p.max_tasks = 512;
  return p;
}

std::string Account(const std::optional<AccountId>& id, const std::string& name, const char* unset) {
  if (!id) return unset;
  std::string number = AccountText(*id);
  return name.empty() || name == number ? number : name + " (" + number + ")";
}

}  // namespace

std::optional<int> CapabilityFromName(std::string_view name) {
  auto it = std::find(kCapabilityNames.begin(), kCapabilityNames.end(), name);
  if (it == kCapabilityNames.end()) return std::nullopt;
  return static_cast<int>(it - kCapabilityNames.begin());
}

std::string CapabilityName(int capability) {
  if (capability >= 0 && capability < static_cast<int>(kCapabilityNames.size())) {
    return std::string(kCapabilityNames[capability]);
  }
  return "CAP_" + std::to_string(capability);
}

int LastNamedCapability() { return static_cast<int>(kCapabilityNames.size()) - 1; }

GroupPrivileges DefaultGroupPrivileges(std::string_view table_name) {
  // Why each group holds what it holds is said in docs/configuration.md ("Privileges of an isolated group"); the
  // sets stay inside the shipped systemd unit's CapabilityBoundingSet, which a runner cannot exceed.
  struct Default {
    std::string_view group;
    std::vector<std::string_view> capabilities;
    uint64_t memory_mib;
  };
  static const Default kDefaults[] = {
      {"disk", {"CAP_SYS_ADMIN", "CAP_SYS_RAWIO"}, 1024},
      {"volume", {"CAP_SYS_ADMIN", "CAP_SYS_RESOURCE", "CAP_DAC_OVERRIDE"}, 4096},
      {"filesystem", {"CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_SYS_ADMIN"}, 512},
      {"smb",
       {"CAP_SYS_ADMIN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP",
        "CAP_KILL"},
       512},
      {"iscsi", {}, 512},
      {"system", {"CAP_SYS_ADMIN"}, 512},
  };
  for (const Default& d : kDefaults) {
    if (d.group == table_name) return Privileges(d.capabilities, d.memory_mib);
  }
  return Privileges({}, 512);  // a third party's group: nothing until its table says what it needs
}

const std::vector<std::string_view>& RefusedSystemCalls() {
  static const std::vector<std::string_view> calls = {
      // Replacing or stopping the kernel, changing its code.
      "kexec_load", "kexec_file_load", "reboot", "init_module", "finit_module", "delete_module",
      // Other processes' memory and state: a group has no business debugging anyone.
      "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
      // Kernel programs and tracing, the usual first step of a kernel exploit.
      "bpf", "perf_event_open", "userfaultfd", "lookup_dcookie",
      // Swap, the clock, accounting, raw I/O ports, the LDT.
      "swapon", "swapoff", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "acct", "ioperm", "iopl",
      "modify_ldt",
      // Files by handle, which bypass the path walk (the "shocker" escape); the kernel's log; the terminal.
      "open_by_handle_at", "syslog", "vhangup",
      // Obsolete calls nothing modern makes.
      "uselib", "ustat", "sysfs", "_sysctl", "create_module", "get_kernel_syms", "query_module", "nfsservctl",
      "afs_syscall", "tuxcall", "security", "vserver", "getpmsg", "putpmsg"};
  return calls;
}

std::string DescribePrivileges(const GroupPrivileges& p) {
  std::string out = "capabilities: ";
  if (p.capabilities.empty()) out += "none";
  for (size_t i = 0; i < p.capabilities.size(); ++i) out += (i ? "," : "") + CapabilityName(p.capabilities[i]);
  out += "; user: " + Account(p.user, p.user_name, "root");
  if (p.group || p.user) out += "; group: " + Account(p.group, p.group_name, "root");
  out += "; no_new_privs; seccomp: " + std::to_string(RefusedSystemCalls().size()) +
         " system calls refused, signals to the host refused (EPERM); limits: ";
  auto limit = [](uint64_t value, const char* what, uint64_t unit, const char* unit_name) {
    std::string text = std::string(what) + " ";
    if (value == 0) return text + "inherited";
    if (unit > 1 && value % unit == 0) return text + std::to_string(value / unit) + unit_name;
    return text + std::to_string(value) + (unit > 1 ? " bytes" : "");
  };
  out += limit(p.max_memory_bytes, "memory", kMiB, " MiB") + ", " + limit(p.max_open_files, "open files", 1, "") +
         ", " + limit(p.max_tasks, "tasks", 1, "");
  return out;
}

}  // namespace csi_proxy::host

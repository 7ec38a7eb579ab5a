// See privileges.h: rlimits, setresuid with PR_SET_KEEPCAPS, libcap for the capability sets, libseccomp for the
// filter.
#include "isolation/privileges.h"

#include <dirent.h>
#include <grp.h>
#include <seccomp.h>
#include <sys/capability.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>

namespace csi_proxy::host {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitizerBuild = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitizerBuild = true;
#else
constexpr bool kSanitizerBuild = false;
#endif
#else
constexpr bool kSanitizerBuild = false;
#endif

std::string Errno(const std::string& what, int err) { return what + ": " + std::strerror(err); }

struct CapFree {
  void operator()(cap_t c) const { cap_free(c); }
};
using CapSet = std::unique_ptr<std::remove_pointer_t<cap_t>, CapFree>;

bool Wanted(const GroupPrivileges& p, int capability) {
  return std::binary_search(p.capabilities.begin(), p.capabilities.end(), capability);
}

Status RequireSingleThread() {
  DIR* tasks = opendir("/proc/self/task");
  if (tasks == nullptr)
    return FailedPrecondition(Errno("cannot count this process's threads (/proc/self/task)", errno));
  int threads = 0;
  while (dirent* entry = readdir(tasks)) threads += entry->d_name[0] != '.';
  closedir(tasks);
  if (threads != 1) {
    return FailedPrecondition(
        "confining a process needs it single-threaded (credentials and capabilities belong to "
        "a thread), and this one has " +
        std::to_string(threads) + " threads");
  }
  return Status::Ok();
}

// Every capability asked for and every one the steps use must be in the permitted set (which the bounding set
// bounds already): a set the host does not hold cannot be granted, and failing halfway would be worse.
Status RequireHeld(const GroupPrivileges& p) {
  CapSet now(cap_get_proc());
  if (!now) return Internal(Errno("cap_get_proc", errno));
  std::vector<int> needed = p.capabilities;
  needed.insert(needed.end(), {CAP_SETPCAP, CAP_SETGID});  // the bounding set; the supplementary groups
  if (p.user) needed.push_back(CAP_SETUID);
  std::sort(needed.begin(), needed.end());
  needed.erase(std::unique(needed.begin(), needed.end()), needed.end());
  std::string missing;
  for (int capability : needed) {
    cap_flag_value_t permitted = CAP_CLEAR;
    if (capability > static_cast<int>(cap_max_bits()) - 1 ||
        cap_get_flag(now.get(), capability, CAP_PERMITTED, &permitted) != 0 || permitted != CAP_SET) {
      missing += (missing.empty() ? "" : ",") + CapabilityName(capability);
    }
  }
  if (missing.empty()) return Status::Ok();
  return FailedPrecondition("this process does not hold " + missing +
                            " (its permitted set, bounded by the service's CapabilityBoundingSet, lacks them), so it "
                            "cannot confine a group to the capabilities asked for");
}

// A limit is only ever lowered: one above the process's own hard limit would fail halfway through.
Status RequireLimitsWithin(const GroupPrivileges& p) {
  const struct {
    int resource;
    const char* key;
    uint64_t value;
  } limits[] = {{RLIMIT_DATA, "max_memory_bytes", p.max_memory_bytes},
                {RLIMIT_NOFILE, "max_open_files", p.max_open_files},
                {RLIMIT_NPROC, "max_tasks", p.max_tasks}};
  for (const auto& limit : limits) {
    rlimit now{};
    if (getrlimit(limit.resource, &now) != 0) return Internal(Errno(std::string("getrlimit for ") + limit.key, errno));
    if (limit.value != 0 && now.rlim_max != RLIM_INFINITY && limit.value > now.rlim_max) {
      return FailedPrecondition(std::string(limit.key) + " " + std::to_string(limit.value) +
                                " is above this process's own hard limit, " + std::to_string(now.rlim_max) +
                                ", which a confinement does not raise");
    }
  }
  return Status::Ok();
}

Status SetLimit(int resource, const char* name, uint64_t value) {
  if (value == 0) return Status::Ok();
  rlimit limit{static_cast<rlim_t>(value), static_cast<rlim_t>(value)};
  if (setrlimit(resource, &limit) != 0) return Internal(Errno(std::string("setrlimit ") + name, errno));
  return Status::Ok();
}

Status SetLimits(const GroupPrivileges& p) {
  if (!kSanitizerBuild) CSI_PROXY_RETURN_IF_ERROR(SetLimit(RLIMIT_DATA, "RLIMIT_DATA", p.max_memory_bytes));
  CSI_PROXY_RETURN_IF_ERROR(SetLimit(RLIMIT_NOFILE, "RLIMIT_NOFILE", p.max_open_files));
  return SetLimit(RLIMIT_NPROC, "RLIMIT_NPROC", p.max_tasks);
}

Status SwitchAccount(const GroupPrivileges& p) {
  // The host's supplementary groups (a root service may have some) give a group nothing it asked for.
  const gid_t gid = p.group.value_or(getgid());
  if (setgroups(1, &gid) != 0) return Internal(Errno("setgroups", errno));
  if (p.group && setresgid(gid, gid, gid) != 0) return Internal(Errno("setresgid " + std::to_string(gid), errno));
  if (!p.user) return Status::Ok();
  // Without KEEPCAPS the kernel empties the permitted set when no uid stays 0; the sets are cut down next.
  if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0) return Internal(Errno("PR_SET_KEEPCAPS", errno));
  if (setresuid(*p.user, *p.user, *p.user) != 0) return Internal(Errno("setresuid " + std::to_string(*p.user), errno));
  if (prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) != 0) return Internal(Errno("PR_SET_KEEPCAPS", errno));
  return Status::Ok();
}

Status SetCapabilities(const GroupPrivileges& p) {
  // Dropping from the bounding set takes CAP_SETPCAP in the effective set, which a uid change has just emptied.
  CapSet working(cap_get_proc());
  if (!working) return Internal(Errno("cap_get_proc", errno));
  const cap_value_t setpcap = CAP_SETPCAP;
  if (cap_set_flag(working.get(), CAP_EFFECTIVE, 1, &setpcap, CAP_SET) != 0 || cap_set_proc(working.get()) != 0) {
    return Internal(Errno("raising CAP_SETPCAP", errno));
  }
  for (int capability = 0; capability < static_cast<int>(cap_max_bits()); ++capability) {
    if (Wanted(p, capability) || cap_get_bound(capability) != 1) continue;
    if (cap_drop_bound(capability) != 0) {
      return Internal(Errno("dropping " + CapabilityName(capability) + " from the bounding set", errno));
    }
  }
  CapSet final_set(cap_init());
  if (!final_set) return Internal(Errno("cap_init", errno));
  std::vector<cap_value_t> values(p.capabilities.begin(), p.capabilities.end());
  if (!values.empty()) {
    for (cap_flag_t flag : {CAP_EFFECTIVE, CAP_PERMITTED, CAP_INHERITABLE}) {
      if (cap_set_flag(final_set.get(), flag, static_cast<int>(values.size()), values.data(), CAP_SET) != 0) {
        return Internal(Errno("cap_set_flag", errno));
      }
    }
  }
  if (cap_set_proc(final_set.get()) != 0) return Internal(Errno("setting the capability sets", errno));
  if (cap_reset_ambient() != 0) return Internal(Errno("clearing the ambient set", errno));
  for (cap_value_t value : values) {
    if (cap_set_ambient(value, CAP_SET) != 0) {
      return Internal(Errno("raising " + CapabilityName(value) + " in the ambient set", errno));
    }
  }
  return Status::Ok();
}

struct FilterRelease {
  void operator()(void* ctx) const { seccomp_release(ctx); }
};

// Adds a rule to `filter` that refuses `call` (its number) with EPERM: always, or when `when` holds.
Status Refuse(void* filter, std::string_view call, int number, std::optional<scmp_arg_cmp> when = std::nullopt) {
  const int rc = when ? seccomp_rule_add(filter, SCMP_ACT_ERRNO(EPERM), number, 1, *when)
                      : seccomp_rule_add(filter, SCMP_ACT_ERRNO(EPERM), number, 0);
  return rc == 0 ? Status::Ok() : Internal(Errno("seccomp_rule_add " + std::string(call), -rc));
}

// A pid is a 32-bit int in a 64-bit register whose upper half the kernel ignores and a caller may fill with
// anything: every comparison looks at the lower half only.
scmp_arg_cmp FirstArgumentIs(pid_t pid) { return SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffff, static_cast<uint32_t>(pid)); }

// The signals privileges.h lists: to `host`, to its process group and to everyone at once.
Status RefuseSignalsToTheHost(void* filter, pid_t host) {
  // kill(-1): every process the caller may signal, which for root without CAP_KILL is every root process.
  CSI_PROXY_RETURN_IF_ERROR(Refuse(filter, "kill", SCMP_SYS(kill), FirstArgumentIs(-1)));
  // tkill names a thread without its process, so a thread of the host could be named; glibc uses tgkill.
  CSI_PROXY_RETURN_IF_ERROR(Refuse(filter, "tkill", SCMP_SYS(tkill)));
  if (host <= 0) return Status::Ok();
  // The first argument is the process (tgkill's and rt_tgsigqueueinfo's thread group) in each.
  CSI_PROXY_RETURN_IF_ERROR(Refuse(filter, "kill", SCMP_SYS(kill), FirstArgumentIs(host)));
  CSI_PROXY_RETURN_IF_ERROR(Refuse(filter, "tgkill", SCMP_SYS(tgkill), FirstArgumentIs(host)));
  CSI_PROXY_RETURN_IF_ERROR(Refuse(filter, "rt_sigqueueinfo", SCMP_SYS(rt_sigqueueinfo), FirstArgumentIs(host)));
  CSI_PROXY_RETURN_IF_ERROR(Refuse(filter, "rt_tgsigqueueinfo", SCMP_SYS(rt_tgsigqueueinfo), FirstArgumentIs(host)));
  CSI_PROXY_RETURN_IF_ERROR(Refuse(filter, "pidfd_open", SCMP_SYS(pidfd_open), FirstArgumentIs(host)));
  // The host's process group, which the caller is not in (a runner leads a process group of its own). Other
  // groups stay reachable: the shipped groups start each program they run in a group of its own and stop it with
  // kill(-pid) (plugins/common/run_program_linux.cc).
  if (const pid_t host_group = getpgid(host); host_group > 1 && host_group != getpgrp()) {
    CSI_PROXY_RETURN_IF_ERROR(Refuse(filter, "kill", SCMP_SYS(kill), FirstArgumentIs(-host_group)));
  }
  return Status::Ok();
}

// Typing into a terminal (TIOCSTI: as if its user had; TIOCLINUX: the console's paste): a runner started from a
// shell shares that shell's terminal, and CAP_SYS_ADMIN, which most groups hold, lets TIOCSTI reach any terminal.
// The request is an unsigned int: compared on the lower half of its register.
Status RefuseTerminalInput(void* filter) {
  for (const unsigned long request : {TIOCSTI, TIOCLINUX}) {
    CSI_PROXY_RETURN_IF_ERROR(Refuse(filter, "ioctl", SCMP_SYS(ioctl),
                                     SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffff, static_cast<uint32_t>(request))));
  }
  return Status::Ok();
}

Status LoadSystemCallFilter(pid_t host) {
  std::unique_ptr<void, FilterRelease> filter(seccomp_init(SCMP_ACT_ALLOW));
  if (!filter) return Internal("seccomp_init failed");
  for (std::string_view name : RefusedSystemCalls()) {
    if (kSanitizerBuild && name == "ptrace") continue;
    const int number = seccomp_syscall_resolve_name(std::string(name).c_str());
    if (number < 0) continue;  // not a call of this architecture (ioperm on arm64, ...)
    CSI_PROXY_RETURN_IF_ERROR(Refuse(filter.get(), name, number));
  }
  CSI_PROXY_RETURN_IF_ERROR(RefuseSignalsToTheHost(filter.get(), host));
  CSI_PROXY_RETURN_IF_ERROR(RefuseTerminalInput(filter.get()));
  if (int rc = seccomp_load(filter.get()); rc != 0) return Internal(Errno("loading the seccomp filter", -rc));
  return Status::Ok();
}

}  // namespace

bool SanitizerBuildRelaxesPrivileges() { return kSanitizerBuild; }

Status ApplyGroupPrivileges(const GroupPrivileges& p, pid_t host) {
  CSI_PROXY_RETURN_IF_ERROR(RequireSingleThread());
  CSI_PROXY_RETURN_IF_ERROR(RequireHeld(p));
  CSI_PROXY_RETURN_IF_ERROR(RequireLimitsWithin(p));
  CSI_PROXY_RETURN_IF_ERROR(SetLimits(p));
  CSI_PROXY_RETURN_IF_ERROR(SwitchAccount(p));
  CSI_PROXY_RETURN_IF_ERROR(SetCapabilities(p));
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return Internal(Errno("PR_SET_NO_NEW_PRIVS", errno));
  return LoadSystemCallFilter(host);
}

}  // namespace csi_proxy::host

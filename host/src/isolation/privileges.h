// The confinement an isolated group's runner puts itself in before it loads the group's library: what
// config/group_privileges.h describes, applied to the calling process for good.
#pragma once

#include <sys/types.h>

#include "config/group_privileges.h"
#include "csi_proxy/status.hpp"

namespace csi_proxy::host {

// Confines the calling process to `privileges`, in this order (Linux, privileges_linux.cc):
//  1. resource limits, soft and hard: RLIMIT_DATA (max_memory_bytes), RLIMIT_NOFILE (max_open_files),
//     RLIMIT_NPROC (max_tasks); 0 keeps the inherited limit;
//  2. the account: supplementary groups dropped (only the group stays), then the group and, keeping the
//     capabilities across the change (PR_SET_KEEPCAPS), the user; nothing changes when neither is set (root);
//  3. capabilities: the bounding set dropped to `capabilities`, then the effective, permitted, inheritable and
//     ambient sets set to exactly them (ambient, so that programs the library runs keep them as a non-root user);
//  4. PR_SET_NO_NEW_PRIVS: no program it runs gains privileges through setuid bits or file capabilities;
//  5. a seccomp filter refusing RefusedSystemCalls() with EPERM (calls of a foreign ABI, 32-bit x86 or x32,
//     kill the process), and, with EPERM too, a signal to `host` (kill, tgkill, rt_sigqueueinfo,
//     rt_tgsigqueueinfo, or a pidfd_open of it for pidfd_send_signal), to its process group (kill(-pgid)) or to
//     every process at once (kill(-1)), and tkill, which nothing modern uses. The caller's own process, threads and
//     group, its children and their groups stay reachable: glibc's raise, abort and pthread_kill, kill(0, ...), and
//     a library stopping the programs it ran (by pid or by their own group) need them. The runner leads a process
//     group of its own (the host starts it so), so that its group holds only itself and its children. And, with
//     EPERM, ioctl's TIOCSTI and TIOCLINUX, which type into a terminal.
// Checks first, changing nothing on failure, that the process is single-threaded (credentials and capabilities
// belong to a thread) and holds every capability asked for plus those the steps need (CAP_SETPCAP, CAP_SETGID,
// and CAP_SETUID to switch users) and that no limit is above its own hard limit: FAILED_PRECONDITION naming what
// is missing. A failure after that
// leaves the process partly confined; the caller must then exit, never load the library. The runner calls this
// first thing, before it loads the library or starts a thread. Windows: UNIMPLEMENTED (docs/windows.md).
// `host`: the process that started the caller (the runner's parent); 0 when there is none to protect.
Status ApplyGroupPrivileges(const GroupPrivileges& privileges, pid_t host);

// True in a build with AddressSanitizer (the test suite's sanitizer pass; never shipped), where
// ApplyGroupPrivileges sets no memory limit and does not refuse ptrace: the sanitizer keeps terabytes of shadow
// memory in private writable mappings, which RLIMIT_DATA counts, and LeakSanitizer stops the process's threads with
// ptrace when it exits.
bool SanitizerBuildRelaxesPrivileges();

}  // namespace csi_proxy::host

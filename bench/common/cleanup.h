// Leaves the machine as the benchmarks found it, also when a run is interrupted.
//
// Everything a benchmark creates outside its own memory (loop devices, mounts, child processes, scratch files)
// is registered here while it exists. Normal code releases things through RAII; the signal handlers installed
// by InstallCleanupHandlers() undo whatever is still registered when SIGINT, SIGTERM, SIGHUP, SIGQUIT or SIGABRT
// arrives, then let the signal end the process. A SIGKILL cannot be caught: children die with their parent
// (PR_SET_PDEATHSIG) and loop devices are attached with LO_FLAGS_AUTOCLEAR, so the kernel detaches them when the
// last descriptor goes away; only a mount would stay, and that is why mounts are made under a scratch directory.
//
// The registry is a fixed table of atomics so the signal handler reads it without locks or allocation.
#pragma once

#include <sys/types.h>

#include <string>

namespace csi_proxy::bench {

// Installs the handlers once per process. Safe to call more than once.
void InstallCleanupHandlers();

// Each Register* returns a slot (or -1 when the table is full: the thing is still released by RAII, it just
// is not covered by the signal handler). Pass the slot to the matching Unregister once the thing is gone.
int RegisterChild(pid_t pid);            // killed with SIGKILL
int RegisterLoopDevice(int fd);          // LOOP_CLR_FD on this open descriptor of /dev/loopN
int RegisterMount(const std::string& target);  // umount2(target, MNT_DETACH)
int RegisterPath(const std::string& path);     // unlink(), or rmdir() for a directory, after the above
void UnregisterChild(int slot);
void UnregisterLoopDevice(int slot);
void UnregisterMount(int slot);
void UnregisterPath(int slot);

}  // namespace csi_proxy::bench

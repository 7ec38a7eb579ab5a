// Leaves the machine as a program found it, also when a run is interrupted (the benchmarks install the handlers;
// a test's leftovers are undone by RAII and by the test framework's own process end).
//
// Everything a program creates outside its own memory (loop devices, mounts, child processes, temporary
// directories) is registered here while it exists. Normal code releases things through RAII. InstallCleanupHandlers()
// blocks SIGINT, SIGTERM, SIGHUP and SIGQUIT in every thread and takes them on a thread of its own, which kills the
// children, unmounts, detaches the loop devices and removes the scratch directories, then lets the signal end the
// process; SIGABRT gets the same undo (without the directory removal) from an async-signal-safe handler. SIGKILL
// cannot be caught: children die with their parent (PR_SET_PDEATHSIG) and loop devices are attached with
// LO_FLAGS_AUTOCLEAR, so the kernel detaches them when the last descriptor goes away.
//
// The registry is a fixed table of atomics so that the SIGABRT handler reads it without locks or allocation.
#pragma once

#include <sys/types.h>

#include <string>

namespace csi_proxy::testing {

// Installs the handlers once per process; call it first thing in main, before any thread is started.
void InstallCleanupHandlers();

// Each Register* returns a slot (or -1 when the table is full: the thing is still released by RAII, it just
// is not covered by the signal handler). Pass the slot to the matching Unregister once the thing is gone.
int RegisterChild(pid_t pid);                  // killed with SIGKILL
int RegisterLoopDevice(int fd);                // LOOP_CLR_FD on this open descriptor of /dev/loopN
int RegisterMount(const std::string& target);  // umount2(target, MNT_DETACH)
int RegisterPath(const std::string& path);     // removed (recursively) after the above
void UnregisterChild(int slot);
void UnregisterLoopDevice(int slot);
void UnregisterMount(int slot);
void UnregisterPath(int slot);

}  // namespace csi_proxy::testing

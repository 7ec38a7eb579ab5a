#!/usr/bin/env bash
# Runs inside the VM lane's guest as its only service (tests/vm/init writes the unit): starts the servers the
# kernel tests need on loopback, runs the tests, and writes what happened to the results share, which is a host
# directory. The guest powers off when this script ends, whatever it returns.
#   $CSI_VM_RESULTS/args     ctest arguments, one per line (written by tests/vm/run.sh; default: -L kernel)
#   $CSI_VM_RESULTS/script   a script to run instead of ctest (run.sh --run), given the results directory;
#                            its output goes to script.log
#   $CSI_VM_RESULTS/build    the build directory to test
#   $CSI_VM_RESULTS/timeout  seconds the tests may take in all
#   $CSI_VM_RESULTS/ctest.log  ctest's output        (written here)
#   $CSI_VM_RESULTS/status     ctest's exit status   (written here, last)
set -uo pipefail
results=${CSI_VM_RESULTS:?}
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8

export CSI_PROXY_VM_GUEST=1  # tests that change the machine's systemd run only here (tests/support/vm_guest.h)
echo "csi-vm: guest up after $(cut -d' ' -f1 /proc/uptime) s"
ip link set lo up
# Without udev nothing loads drivers for new devices: SCSI disks (an iSCSI LUN) and loop devices need these.
modprobe -a sd_mod loop 2>/dev/null || true

# iscsid, for open-iscsi's logins; it stops with the guest. Its node database is in the guest's overlay.
iscsid_pid=
if command -v iscsid >/dev/null; then
  setsid iscsid -f >"$results/iscsid.log" 2>&1 &
  iscsid_pid=$!
fi

if [ "${CSI_VM_SHELL:-}" = 1 ]; then
  echo "csi-vm: a shell in the guest; the build tree is $(cat "$results/build"); exit (or Ctrl-D) powers off"
  cd "$(cat "$results/build")" && bash -i
  exit 0
fi

build=$(cat "$results/build")
limit=$(cat "$results/timeout" 2>/dev/null || echo 480)

# Hands the exit status to run.sh on the host (the results share, written last) and ends the guest's work.
finish() {
  echo "$1" >"$results/status.tmp" && mv "$results/status.tmp" "$results/status"
  sync
  if [ -n "$iscsid_pid" ]; then kill "$iscsid_pid" 2>/dev/null || true; fi
  exit 0
}

if [ -s "$results/script" ]; then
  script=$(cat "$results/script")
  echo "csi-vm: running $script (at most $limit s)"
  (cd "$build" && timeout --kill-after=10 "$limit" bash "$script" "$results") >"$results/script.log" 2>&1
  status=$?
  echo "csi-vm: $script exit $status"
  finish "$status"
fi
args=()
if [ -s "$results/args" ]; then
  mapfile -t args <"$results/args"
else
  args=(-L kernel)
fi
# A failed test runs again, at most three times in all: in the slow guest, ListVolumesOnDisk right after
# PartitionDisk sometimes finds no partition (a race in the product, tests/vm/README.md "Known"); the first
# failure stays in ctest.log.
echo "csi-vm: ctest ${args[*]} in $build (at most $limit s)"
start=$(date +%s)
timeout --kill-after=10 "$limit" ctest --test-dir "$build" --output-on-failure --no-tests=error --timeout 300 \
  --repeat until-pass:3 "${args[@]}" \
  >"$results/ctest.log" 2>&1
status=$?
echo "csi-vm: ctest exit $status after $(($(date +%s) - start)) s"
finish "$status"

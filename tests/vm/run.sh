#!/usr/bin/env bash
# The VM lane: boots Debian's stock kernel under QEMU (software emulation, never KVM) with this machine's root
# shared read-only and a tmpfs overlay on top, and runs the kernel tests (ctest label `kernel`) inside, where
# cifs, iscsi_tcp, CAP_SYS_RESOURCE and systemd as PID 1 are real. See tests/vm/README.md.
#
#   tests/vm/run.sh                      run `ctest -L kernel` in the guest; exit with its status
#   tests/vm/run.sh -- -R SmbEndToEnd    run these ctest arguments instead
#   tests/vm/run.sh --shell              a root shell in the guest on this terminal (exit powers it off)
#   tests/vm/run.sh --run SCRIPT         run SCRIPT (bash, in the guest) instead of ctest; exit with its status
# Options: --build DIR (default: build), --timeout SECONDS (the whole run, QEMU included; default 900),
#   --qemu-arg ARG (one more QEMU argument, repeatable: the disks of tests/vm/record-disk-ids.sh).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"

build=build
limit=900
mode="test"
ctest_args=()
extra_qemu=()
guest_script=
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --timeout) limit=$2; shift 2 ;;
    --shell) mode=shell; shift ;;
    --qemu-arg) extra_qemu+=("$2"); shift 2 ;;
    --run) guest_script=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift 2 ;;
    --) shift; ctest_args=("$@"); break ;;
    *)
      echo "usage: tests/vm/run.sh [--build DIR] [--timeout SECONDS] [--qemu-arg ARG]... [--shell | --run SCRIPT |" \
        "-- CTEST_ARGS...]" >&2
      exit 2
      ;;
  esac
done
build=$(cd "$build" && pwd)

# What the lane needs from Debian: QEMU, a stock kernel, a static busybox for the initramfs.
missing=()
for p in qemu-system-x86 linux-image-amd64 busybox-static cpio kmod; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ] ||
    ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
    echo "vm lane: cannot install ${missing[*]} (QEMU and a Debian kernel are needed); the VM lane did not run" >&2
    exit 1
  fi
fi
kernel=$(find /boot -maxdepth 1 -name "vmlinuz-*" | sort -V | tail -n 1)
if [ -z "$kernel" ]; then
  echo "vm lane: no kernel in /boot (Debian package linux-image-amd64); the VM lane did not run" >&2
  exit 1
fi
kver=${kernel#/boot/vmlinuz-}

work=$build/vm
mkdir -p "$work"
initramfs=$work/initramfs-$kver.cpio.gz
if [ ! -s "$initramfs" ] || [ tests/vm/init -nt "$initramfs" ] || [ tests/vm/make-initramfs.sh -nt "$initramfs" ]; then
  bash tests/vm/make-initramfs.sh "$kver" "$initramfs"
fi

results=$work/results
rm -rf "$results"
mkdir -p "$results"
echo "$build" >"$results/build"
echo $((limit > 120 ? limit - 60 : limit / 2)) >"$results/timeout"  # the tests' own bound, inside QEMU's
[ ${#ctest_args[@]} -eq 0 ] || printf '%s\n' "${ctest_args[@]}" >"$results/args"
[ -z "$guest_script" ] || echo "$guest_script" >"$results/script"

qemu=(qemu-system-x86_64 -accel tcg -cpu max -smp 2 -m 3072 -no-reboot -nodefaults -display none
  -kernel "$kernel" -initrd "$initramfs"
  -append "console=ttyS0 quiet loglevel=2 panic=-1 csivm.repo=$repo csivm.mode=$mode systemd.unit=csi-vm.target systemd.show_status=0"
  -virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"
  -virtfs "local,path=$results,mount_tag=results,security_model=none,multidevs=remap"
  "${extra_qemu[@]}")

if [ "$mode" = shell ]; then
  exec "${qemu[@]}" -serial mon:stdio
fi

echo "== VM lane: $kver under QEMU (TCG), at most $limit s"
start=$(date +%s)
"${qemu[@]}" -serial "file:$results/console.log" -monitor none &
qemu_pid=$!
trap 'kill "$qemu_pid" 2>/dev/null || true' EXIT INT TERM
timed_out=0
while kill -0 "$qemu_pid" 2>/dev/null; do
  if [ $(($(date +%s) - start)) -ge "$limit" ]; then
    timed_out=1
    kill "$qemu_pid" 2>/dev/null || true
    sleep 2
    kill -9 "$qemu_pid" 2>/dev/null || true
    break
  fi
  sleep 1
done
wait "$qemu_pid" 2>/dev/null || true
trap - EXIT INT TERM
elapsed=$(($(date +%s) - start))

[ -f "$results/ctest.log" ] && cat "$results/ctest.log"
[ -f "$results/script.log" ] && cat "$results/script.log"
if [ "$timed_out" = 1 ]; then
  echo "vm lane: FAILED: QEMU (pid $qemu_pid) still ran after $limit s and was stopped; console: $results/console.log" >&2
  tail -n 30 "$results/console.log" >&2 || true
  exit 1
fi
if [ ! -s "$results/status" ]; then
  echo "vm lane: FAILED: the guest reported no result after $elapsed s; console: $results/console.log" >&2
  tail -n 30 "$results/console.log" >&2 || true
  exit 1
fi
status=$(cat "$results/status")
echo "== VM lane: ${guest_script:+guest script }${guest_script:-ctest} exit $status, $elapsed s in all (console: $results/console.log)"
exit "$status"

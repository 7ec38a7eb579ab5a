#!/usr/bin/env bash
# Runs a command inside a fresh Wine prefix of its own and removes every trace after it:
#
#   scripts/windows/wine-session.sh [--timeout SECONDS] -- COMMAND [ARGS...]
#
# The prefix is a new temporary directory (WINEPREFIX, exported to the command); its wineserver is started here
# and stopped by its process id, together with every Windows process still running in the prefix, also when the
# command fails or overruns its time (default 1200 s). Exits with the command's status (124 when it overran).
set -euo pipefail

limit=1200
while [ $# -gt 0 ]; do
  case "$1" in
    --timeout) limit=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "usage: wine-session.sh [--timeout SECONDS] -- COMMAND [ARGS...]" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || { echo "wine-session.sh: no command" >&2; exit 2; }

wine_dir=${CSI_PROXY_WINE_DIR:-/usr/lib/wine}
[ -x "$wine_dir/wine64" ] || { echo "wine-session.sh: $wine_dir/wine64 missing (Debian's wine64)" >&2; exit 1; }
scratch=$(mktemp -d "${TMPDIR:-/tmp}/csi-proxy-wine.XXXXXX")
export WINEPREFIX=$scratch/prefix
# Wine puts its server's socket directory under TMPDIR: inside the scratch directory, it goes with it.
export TMPDIR=$scratch/tmp
export WINEDEBUG=${WINEDEBUG:--all}
export WINEDLLOVERRIDES=${WINEDLLOVERRIDES:-"mscoree,mshtml="}  # no Mono or Gecko installer prompts
server_pid=""

prefix_pids() {  # processes whose environment names this prefix
  local p
  for p in /proc/[0-9]*; do
    grep -qzx "WINEPREFIX=$WINEPREFIX" "$p/environ" 2>/dev/null && echo "${p#/proc/}"
  done
  return 0
}
finish() {
  local status=$?
  # wineserver -k ends the Windows processes of this prefix; then the server itself and any straggler, by pid.
  "$wine_dir/wineserver" -k 2>/dev/null || true
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  [ -n "$server_pid" ] && wait "$server_pid" 2>/dev/null || true
  local left
  left=$(prefix_pids)
  if [ -n "$left" ]; then
    echo "wine-session.sh: stopping processes left in the prefix: $left" >&2
    kill -9 $left 2>/dev/null || true
  fi
  rm -rf "$scratch"
  exit "$status"
}
trap finish EXIT
trap 'exit 130' INT TERM

mkdir -p "$WINEPREFIX" "$TMPDIR"
"$wine_dir/wineserver" -f -p &
server_pid=$!
# Wine programs started before the server listens would start a server of their own.
for _ in $(seq 100); do
  [ -n "$(find "$TMPDIR" -name socket -type s 2>/dev/null)" ] && break
  sleep 0.1
done
# The prefix's first start (registry, C:\windows) happens once here, not inside the first test's time.
if ! timeout 300 "$wine_dir/wine64" wineboot --init >"$scratch/wineboot.log" 2>&1; then
  echo "wine-session.sh: wineboot failed:" >&2
  cat "$scratch/wineboot.log" >&2
  exit 1
fi
# Wine 8 leaves two service managers in a new prefix, both serving \\.\pipe\svcctl: each client talks to either,
# so a service created through one is unknown to the other. The first one started stays.
services=$(for p in $(prefix_pids); do
  if grep -qa 'services.exe' "/proc/$p/cmdline" 2>/dev/null; then echo "$p"; fi
done | sort -n)
extra=$(tail -n +2 <<<"$services")
if [ -n "$extra" ]; then
  kill $extra 2>/dev/null || true
fi
timeout "$limit" "$@"

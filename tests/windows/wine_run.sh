#!/usr/bin/env bash
# ctest's emulator for the Windows build: runs one test executable under Wine. Inside the Windows lane
# (scripts/windows/test.sh) the session's prefix is used; run by hand, it makes a session of its own.
#
# A process that dies of an unhandled exception sometimes exits with status 0 under Wine 8 (its debugger ends it),
# so a crash could pass: the output is watched for Wine's "Unhandled" report, which fails the run.
set -euo pipefail
if [ -z "${WINEPREFIX:-}" ]; then
  exec bash "$(dirname "$0")/../../scripts/windows/wine-session.sh" --timeout 600 -- "$0" "$@"
fi
output=$(mktemp "${TMPDIR:-/tmp}/wine-run.XXXXXX")
trap 'rm -f "$output"' EXIT
status=0
"${CSI_PROXY_WINE_DIR:-/usr/lib/wine}/wine64" "$@" 2>&1 | tee "$output" || status=${PIPESTATUS[0]}
if grep -q '^wine: Unhandled' "$output"; then
  echo "wine_run.sh: $1 died of an unhandled exception (exit status $status)" >&2
  exit 70
fi
exit "$status"

#!/usr/bin/env bash
# A start failure of csi-proxy.exe reaches the Windows event log. Under Wine, ReportEventW writes an error's text
# to Wine's eventlog debug channel, on the process's standard error, which only a program outside Wine can read:
# hence a script rather than a case of host_test.
#
#   event_log_test.sh <csi-proxy.exe>
set -euo pipefail
host=$1
if [ -z "${WINEPREFIX:-}" ]; then
  exec bash "$(dirname "$0")/../../scripts/windows/wine-session.sh" --timeout 300 -- "$0" "$@"
fi
# In the prefix's C: drive: the host refuses a configuration under a directory others may change, as /tmp is.
dir=$(mktemp -d "$WINEPREFIX/drive_c/csi-proxy-event-log.XXXXXX")
trap 'rm -rf "$dir"' EXIT
windows_dir="C:\\$(basename "$dir")"
cat >"$dir/csi-proxy.toml" <<TOML
[host]
state_dir = '$windows_dir\state'
kubelet_path = '$windows_dir'

[groups.echo]
library = 'C:\\nowhere\\csi-proxy-echo.dll'
required = true
TOML
status=0
output=$(WINEDEBUG=err+eventlog "${CSI_PROXY_WINE_DIR:-/usr/lib/wine}/wine64" "$host" --config "$windows_dir\\csi-proxy.toml" 2>&1) ||
  status=$?
echo "$output"
expected="err:eventlog:ReportEventW L\"csi-proxy failed to start: required group 'echo' failed to load"
if [ "$status" != 1 ]; then
  echo "FAIL: csi-proxy.exe exited with $status, not 1"
  exit 1
fi
if ! grep -qF "$expected" <<<"$output"; then
  echo "FAIL: no event log entry: $expected"
  exit 1
fi
echo "PASS: the start failure went to the event log"

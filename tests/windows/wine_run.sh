#!/usr/bin/env bash
# ctest's emulator for the Windows build: runs one test executable under Wine. Inside the Windows lane
# (scripts/windows/test.sh) the session's prefix is used; run by hand, it makes a session of its own.
set -euo pipefail
if [ -z "${WINEPREFIX:-}" ]; then
  exec bash "$(dirname "$0")/../../scripts/windows/wine-session.sh" --timeout 600 -- "$0" "$@"
fi
exec "${CSI_PROXY_WINE_DIR:-/usr/lib/wine}/wine64" "$@"

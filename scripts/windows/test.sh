#!/usr/bin/env bash
# The Windows lane: cross-builds the tree for Windows into build-windows (scripts/windows/build.sh) and runs the
# Windows tests under Wine, in a fresh Wine prefix that is removed afterwards (scripts/windows/wine-session.sh),
# bounded in time.
#
#   scripts/windows/test.sh [ctest arguments...]     e.g. -R pipe
set -euo pipefail
cd "$(dirname "$0")/../.."

bash scripts/windows/build.sh
bash scripts/windows/wine-session.sh --timeout 1500 -- \
  ctest --test-dir build-windows --output-on-failure --timeout 300 "$@"

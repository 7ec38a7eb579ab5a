#!/usr/bin/env bash
# The Windows lane: cross-builds the tree for Windows into build-windows (scripts/windows/build.sh) and runs the
# Windows tests under Wine, in a fresh Wine prefix that is removed afterwards (scripts/windows/wine-session.sh),
# bounded in time.
#
#   scripts/windows/test.sh [ctest arguments...]     e.g. -R pipe
#
# Under Wine a directory's rights come from its mode bits, and Wine has no sticky bit: a tree below /tmp (mode 1777)
# lies, as Windows sees it, in a directory Everyone may change, and the host rightly refuses its libraries and
# configuration (docs/security.md). The lane says so first; such a tree's Windows tests fail.
set -euo pipefail
cd "$(dirname "$0")/../.."

dir=$(pwd -P)
while [ "$dir" != / ]; do
  dir=$(dirname "$dir")
  if [ -n "$(find "$dir" -maxdepth 0 -perm -0002)" ]; then
    echo "warning: the tree lies below $dir, which others may write to; Wine shows it as Everyone's (it has no" \
      "sticky bit), so the host refuses the tree's libraries and configuration and the tests that load them fail:" \
      "clone the tree elsewhere" >&2
  fi
done

bash scripts/windows/build.sh
bash scripts/windows/wine-session.sh --timeout 1500 -- \
  ctest --test-dir build-windows --output-on-failure --timeout 300 "$@"

#!/usr/bin/env bash
# Plants the tree groups_test's PlantedLinks cases use: host symlinks, which Wine follows by itself even when asked
# not to (it has no reparse points), inside an allowed root and pointing outside it.
#
#   tests/windows/plant_links.sh DIR      DIR/kubelet is the allowed root, DIR/outside what must stay untouched
set -euo pipefail
dir=$1
rm -rf "$dir"
mkdir -p "$dir/kubelet/tree/sub" "$dir/outside/dir" "$dir/state"
echo keep >"$dir/outside/keep"
echo keep >"$dir/outside/dir/keep"
echo plain >"$dir/kubelet/tree/plain"
ln -s ../outside "$dir/kubelet/escape"
ln -s ../../../outside/dir "$dir/kubelet/tree/sub/into-outside"

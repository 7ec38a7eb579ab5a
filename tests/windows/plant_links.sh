#!/usr/bin/env bash
# Plants the trees groups_test's FilesystemPlantedLinks cases use, one per way of calling (the fake host,
# csi-proxy.exe): host symlinks, which Wine follows by itself even when asked not to (it has no reparse points),
# inside an allowed root and pointing outside it.
#
#   tests/windows/plant_links.sh DIR...    DIR/kubelet is an allowed root, DIR/outside what must stay untouched
set -euo pipefail
for dir in "$@"; do
  rm -rf "$dir"
  mkdir -p "$dir/kubelet/tree/sub" "$dir/kubelet/contents/sub" "$dir/outside/dir"
  echo keep >"$dir/outside/keep"
  echo keep >"$dir/outside/dir/keep"
  ln -s ../outside "$dir/kubelet/escape"
  for tree in tree contents; do
    echo plain >"$dir/kubelet/$tree/plain"
    ln -s ../../../outside/dir "$dir/kubelet/$tree/sub/into-outside"
  done
done

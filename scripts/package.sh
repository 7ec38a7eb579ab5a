#!/usr/bin/env bash
# Builds the Debian package: installs the build dependencies, builds the tree in build/ (or the directory given)
# and runs `cpack -G DEB` there (settings: deploy/package.cmake). Prints the package's path.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}

bash scripts/install-deps.sh --build-only
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="$PWD"
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
if [ ! -f "$dir/CMakeCache.txt" ]; then
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
fi
cmake --build "$dir" -j"$(nproc)"
(cd "$dir" && cpack -G DEB)
ls "$dir"/csi-proxy_*.deb

#!/usr/bin/env bash
# Cross-builds the tree for Windows into build-windows with MinGW-w64 (sdk/cmake/mingw-w64-x86_64.cmake) and the
# dependency prefix of scripts/windows/build-deps.sh, which builds it when it is missing. The Windows lane
# (scripts/windows/test.sh) and the release zip (scripts/windows/package.sh) start with it.
set -euo pipefail
cd "$(dirname "$0")/../.."

prefix=$(bash scripts/windows/build-deps.sh)
jobs=${CSI_PROXY_JOBS:-$(nproc)}
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="$PWD"
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
# A new dependency prefix (another key) invalidates every package path CMake cached from the old one.
if [ "$(cat build-windows/.deps-prefix 2>/dev/null)" != "$prefix" ]; then
  rm -f build-windows/CMakeCache.txt
fi
cmake -S . -B build-windows -G Ninja -DCMAKE_TOOLCHAIN_FILE="$PWD/sdk/cmake/mingw-w64-x86_64.cmake" \
  -DCSI_PROXY_WINDOWS_DEPS="$prefix" -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
echo "$prefix" >build-windows/.deps-prefix
cmake --build build-windows -j"$jobs"

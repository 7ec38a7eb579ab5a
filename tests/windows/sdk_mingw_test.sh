#!/usr/bin/env bash
# A third party's path on Windows: the SDK installed from the Windows build into a prefix of its own (the release
# zip's layout, sdk\ below it), a copy of the example group (sdk/examples/echo) configured outside any csi-proxy
# tree with the installed MinGW toolchain file and find_package(CsiProxySdk), built into csi-proxy-echo.dll, which
# exports the negotiation function only; then, under Wine, the example's unit test loads the DLL through the SDK's
# fake host, and the installed csi-proxy.exe loads it (--check-config) from beside itself, as a node would.
#
#   tests/windows/sdk_mingw_test.sh BUILD_DIR SOURCE_DIR DEPS_PREFIX    (inside scripts/windows/wine-session.sh)
#
# Its work directory, BUILD_DIR/sdk-out-of-tree, is removed at the end (KEEP=1 keeps it for a look).
set -euo pipefail
build_dir=$1
source_dir=$2
deps=$3
[ -n "${WINEPREFIX:-}" ] || { echo "sdk_mingw_test.sh: run it inside scripts/windows/wine-session.sh" >&2; exit 2; }
wine=${CSI_PROXY_WINE_DIR:-/usr/lib/wine}/wine64
# A fixed place in the build tree, so that a rerun's compiles hit ccache; removed afterwards.
work=$build_dir/sdk-out-of-tree
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
rm -rf "$work"
mkdir -p "$work"

fail() {
  echo "sdk_mingw_test.sh: $*" >&2
  exit 1
}

cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
sdk=$work/prefix/sdk
cp -r "$source_dir/sdk/examples/echo" "$work/echo"
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR=$work
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S "$work/echo" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE="$sdk/lib/cmake/CsiProxySdk/mingw-w64-x86_64.cmake" -DCSI_PROXY_WINDOWS_DEPS="$deps" \
  "${launcher[@]}" >"$work/configure.log" 2>&1 || fail "configure failed: $(cat "$work/configure.log")"
sdk_dir=$(sed -n 's/^CsiProxySdk_DIR:PATH=//p' "$work/build/CMakeCache.txt")
[ "$sdk_dir" = "$sdk/lib/cmake/CsiProxySdk" ] || fail "CsiProxySdk found at '$sdk_dir', not in the installed SDK"
cmake --build "$work/build" >"$work/build.log" 2>&1 || fail "build failed: $(tail -50 "$work/build.log")"

dll=$work/build/csi-proxy-echo.dll
[ -f "$dll" ] || fail "no csi-proxy-echo.dll"
# The C ABI's one entry point, nothing else (sdk/cmake/csi_proxy_plugin.def).
exports=$(x86_64-w64-mingw32-objdump -p "$dll" | sed -n '/\[Ordinal\/Name Pointer\] Table/,/^$/p' |
  sed -n 's/^\t\[ *[0-9]*\] //p')
[ "$exports" = "csi_proxy_plugin_negotiate" ] || fail "the DLL exports: $exports"
# No MinGW runtime DLL to ship beside it.
imports=$(x86_64-w64-mingw32-objdump -p "$dll" | sed -n 's/^\tDLL Name: //p' | tr 'A-Z' 'a-z')
grep -qE 'libstdc|libgcc|libwinpthread' <<<"$imports" && fail "the DLL needs MinGW's runtime: $imports"

# Its unit test, built against the installed SDK too: the DLL through the fake host, under Wine.
tested=$(cd "$work/build" && "$wine" ./echo_plugin_test.exe 2>&1) || fail "echo_plugin_test.exe failed: $tested"
grep -q "\[  PASSED  \] 5 tests." <<<"$tested" || fail "echo_plugin_test.exe: $tested"

# Dropped beside the installed csi-proxy.exe, where the host looks for group DLLs.
cp "$dll" "$work/prefix/"
cat >"$work/echo.toml" <<EOF
[host]
kubelet_path = 'Z:$work\\kubelet'
state_dir = 'Z:$work\\state'
[groups.echo]
required = true
EOF
checked=$("$wine" "$work/prefix/csi-proxy.exe" --check-config --config "Z:$work/echo.toml" 2>&1) ||
  fail "csi-proxy.exe --check-config refused the DLL: $checked"
grep -q 'csi-proxy-echo-v1 ' <<<"$checked" || fail "csi-proxy.exe would not serve the echo group: $checked"
grep -qi "prefix\\\\csi-proxy-echo.dll" <<<"$checked" || fail "not the DLL beside csi-proxy.exe: $checked"
echo "sdk_mingw_test.sh: csi-proxy-echo.dll built out of tree against the installed SDK, tested and loaded"

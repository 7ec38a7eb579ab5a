#!/usr/bin/env bash
# Cross-builds the Windows build's dependencies with MinGW-w64 from Debian's source packages, at the versions the
# Linux build uses (read from its installed -dev packages), into a prefix outside the clone, and prints that
# prefix's path on stdout (everything else goes to stderr and to the logs beside the prefix).
#
#   scripts/windows/build-deps.sh [--prune]
#
# The prefix is <root>/<key>/prefix, root being $CSI_PROXY_WINDOWS_DEPS_ROOT (default /var/cache/csi-proxy/windows-deps)
# and key a hash of the versions, this script, the patches in scripts/windows/patches, the toolchain file
# (sdk/cmake/mingw-w64-x86_64.cmake) and the compiler: a changed script or a new Debian version builds a new prefix;
# an existing complete one is reused at once. --prune removes the other keys' prefixes after building.
# Compiles go through ccache when it is installed, so a rebuild after a small change of this script takes minutes.
# Builds use $CSI_PROXY_JOBS parallel jobs (default 2: the machines are shared).
#
# What is built: gRPC's unsecure C++ libraries (no TLS library is needed), protobuf (runtime libraries only:
# protoc and grpc_cpp_plugin are Debian's Linux binaries of the same versions), abseil, re2, c-ares, zlib,
# googletest, fmt, spdlog, CLI11, and civetweb and prometheus-cpp's core and pull libraries (the host's metrics).
# Header-only parts come from the Linux build's own packages, at the same versions: toml++'s headers from
# libtomlplusplus-dev (Debian builds it as a shared library, the Windows build uses it header-only) and Boost's
# (Boost.DLL loads the group DLLs) from libboost-dev, linked into the prefix.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
root=${CSI_PROXY_WINDOWS_DEPS_ROOT:-/var/cache/csi-proxy/windows-deps}
jobs=${CSI_PROXY_JOBS:-2}
toolchain=$repo/sdk/cmake/mingw-w64-x86_64.cmake
patches=$here/patches
prune=0
for arg in "$@"; do
  case "$arg" in
    --prune) prune=1 ;;
    *) echo "usage: scripts/windows/build-deps.sh [--prune]" >&2; exit 2 ;;
  esac
done
say() { echo "build-deps: $*" >&2; }

# The Linux build's packages first: their versions are the ones to build. The cross toolchain, Wine and the
# build tools are in the same list (scripts/install-deps.sh).
bash "$repo/scripts/install-deps.sh" --build-only >&2

# component  source-package  the Linux build's binary package that fixes the version
components=(
  "zlib         zlib          zlib1g-dev"
  "cares        c-ares        libc-ares-dev"
  "abseil       abseil        libabsl-dev"
  "protobuf     protobuf      libprotobuf-dev"
  "re2          re2           libre2-dev"
  "grpc         grpc          libgrpc++-dev"
  "googletest   googletest    libgtest-dev"
  "fmt          fmtlib        libfmt-dev"
  "spdlog       spdlog        libspdlog-dev"
  "cli11        cli11         libcli11-dev"
  "civetweb     civetweb      libcivetweb-dev"
  "prometheus   prometheus-cpp prometheus-cpp-dev"
)
declare -A srcpkg version
for line in "${components[@]}"; do
  read -r name pkg bin <<<"$line"
  srcpkg[$name]=$pkg
  version[$name]=$(dpkg-query -W -f='${source:Version}' "$bin")
done
toml_version=$(dpkg-query -W -f='${Version}' libtomlplusplus-dev)
boost_version=$(dpkg-query -W -f='${Version}' libboost-dev)

compiler=x86_64-w64-mingw32-g++-posix
key=$( {
  cat "$0" "$toolchain"
  find "$patches" -type f -name '*.patch' | sort | xargs cat
  for line in "${components[@]}"; do read -r name _ <<<"$line"; echo "$name ${version[$name]}"; done
  echo "toml++ $toml_version"
  echo "boost $boost_version"
  $compiler --version | head -1
} | sha256sum | cut -c1-16)
top=$root/$key
prefix=$top/prefix

if [ -e "$prefix/.complete" ]; then
  echo "$prefix"
  exit 0
fi

mkdir -p "$root"
exec 9>"$root/.lock"
if ! flock -n 9; then
  say "another build of the Windows dependencies is running; waiting for it"
  flock 9
fi
if [ -e "$prefix/.complete" ]; then
  echo "$prefix"
  exit 0
fi

# Debian's source archive for bookworm, in an apt sources file of the project's own; apt-get update only when
# that file is new or a wanted source version is not known to apt yet.
sources_file=/etc/apt/sources.list.d/csi-proxy-deb-src.sources
need_update=0
if ! cmp -s "$here/deb-src.sources" "$sources_file"; then
  cp "$here/deb-src.sources" "$sources_file"
  need_update=1
fi
for name in "${!srcpkg[@]}"; do
  apt-cache showsrc "${srcpkg[$name]}" 2>/dev/null | grep -x "Version: ${version[$name]}" >/dev/null || need_update=1
done
if [ "$need_update" = 1 ]; then
  say "apt-get update (deb-src for bookworm)"
  apt-get update -qq >&2
fi

# Sources: downloaded once per version into <root>/sources, unpacked (with Debian's patches) per build.
mkdir -p "$root/sources"
rm -rf "$top"
mkdir -p "$top/build" "$top/logs" "$prefix"
src_dir() {  # component -> the unpacked source tree under $top/build
  local name=$1 pkg=${srcpkg[$1]} v=${version[$1]}
  local dsc
  dsc=$(cd "$root/sources" && ls "${pkg}_${v#*:}.dsc" 2>/dev/null || true)
  if [ -z "$dsc" ]; then
    (cd "$root/sources" && apt-get source -qq --download-only "$pkg=$v") >>"$top/logs/$name.log" 2>&1 ||
      { say "apt-get source $pkg=$v failed (see $top/logs/$name.log)"; exit 1; }
    dsc="${pkg}_${v#*:}.dsc"
  fi
  dpkg-source --no-check -x "$root/sources/$dsc" "$top/build/$name-src" >>"$top/logs/$name.log" 2>&1
  echo "$top/build/$name-src"
}
apply_patches() {  # component source-dir: the project's MinGW patches for it, in name order
  local p
  for p in "$patches/$1"-*.patch; do
    [ -e "$p" ] || continue
    patch -d "$2" -p1 --forward --quiet <"$p" >>"$top/logs/$1.log" 2>&1
  done
}

launcher=()
if command -v ccache >/dev/null; then
  # Paths under the key's folder are rewritten relative, so a rebuild under a new key hits the cache.
  export CCACHE_BASEDIR=$top
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake_configure() {  # component source-dir [cmake args...]
  local name=$1 src=$2
  shift 2
  cmake -S "$src" -B "$top/build/$name" -G Ninja \
    -DCMAKE_TOOLCHAIN_FILE="$toolchain" -DCSI_PROXY_WINDOWS_DEPS="$prefix" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS_RELEASE="-O2 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
    -DCMAKE_CXX_STANDARD=17 -DCMAKE_INSTALL_PREFIX="$prefix" -DBUILD_SHARED_LIBS=OFF -DBUILD_TESTING=OFF \
    "${launcher[@]}" "$@" >>"$top/logs/$name.log" 2>&1
}
cmake_install() {  # component source-dir [cmake args...]: configure, build and install into the prefix
  cmake_configure "$@" || return 1
  cmake --build "$top/build/$1" -j"$jobs" >>"$top/logs/$1.log" 2>&1 || return 1
  cmake --install "$top/build/$1" >>"$top/logs/$1.log" 2>&1
}

build_zlib() {
  # Only the static library: the DLL needs win32/zlib1.rc, which Debian's repacked source leaves out. Installed
  # under the name FindZLIB looks for first.
  cmake_configure zlib "$1" || return 1
  cmake --build "$top/build/zlib" --target zlibstatic -j"$jobs" >>"$top/logs/zlib.log" 2>&1 || return 1
  mkdir -p "$prefix/include" "$prefix/lib" &&
    cp "$1/zlib.h" "$top/build/zlib/zconf.h" "$prefix/include/" &&
    cp "$top/build/zlib/libzlibstatic.a" "$prefix/lib/libz.a"
}
build_cares() {
  cmake_install cares "$1" -DCARES_STATIC=ON -DCARES_SHARED=OFF -DCARES_BUILD_TOOLS=OFF -DCARES_BUILD_TESTS=OFF
}
build_abseil() {
  cmake_install abseil "$1" -DABSL_PROPAGATE_CXX_STD=ON -DABSL_BUILD_TESTING=OFF
}
build_protobuf() {
  cmake_install protobuf "$1" -Dprotobuf_BUILD_TESTS=OFF -Dprotobuf_BUILD_PROTOC_BINARIES=OFF \
    -Dprotobuf_BUILD_LIBPROTOC=OFF -Dprotobuf_WITH_ZLIB=OFF -Dprotobuf_BUILD_EXAMPLES=OFF
}
build_re2() {
  # Debian's repacked source leaves out the generated Unicode tables; they are made as Debian makes them, from
  # its unicode-data package.
  make -C "$1" REBUILD_TABLES=1 re2/perl_groups.cc re2/unicode_casefold.cc re2/unicode_groups.cc \
    >>"$top/logs/re2.log" 2>&1 || return 1
  cmake_install re2 "$1" -DRE2_BUILD_TESTING=OFF
}
build_grpc() {
  # gRPC_UNSECURE_ONLY comes from patches/grpc-*-unsecure-only.patch.
  cmake_install grpc "$1" -DgRPC_UNSECURE_ONLY=ON -DgRPC_BUILD_CODEGEN=OFF -DgRPC_BUILD_TESTS=OFF \
    -DgRPC_BUILD_CSHARP_EXT=OFF -DgRPC_BUILD_GRPC_CPP_PLUGIN=OFF -DgRPC_BUILD_GRPC_CSHARP_PLUGIN=OFF \
    -DgRPC_BUILD_GRPC_NODE_PLUGIN=OFF -DgRPC_BUILD_GRPC_OBJECTIVE_C_PLUGIN=OFF -DgRPC_BUILD_GRPC_PHP_PLUGIN=OFF \
    -DgRPC_BUILD_GRPC_PYTHON_PLUGIN=OFF -DgRPC_BUILD_GRPC_RUBY_PLUGIN=OFF \
    -DgRPC_ZLIB_PROVIDER=package -DgRPC_CARES_PROVIDER=package -DgRPC_RE2_PROVIDER=package \
    -DgRPC_ABSL_PROVIDER=package -DgRPC_PROTOBUF_PROVIDER=package -DgRPC_PROTOBUF_PACKAGE_TYPE=CONFIG \
    -DgRPC_SSL_PROVIDER=module -DgRPC_BENCHMARK_PROVIDER=none || return 1
  # gRPC installs its public API only; the pipe transport's shim (host/src/serving/grpc_socket_adoption_windows.cc)
  # also includes core headers, which go to include/grpc-core, under the paths gRPC's sources use.
  mkdir -p "$prefix/include/grpc-core" &&
    (cd "$1" && find src/core src/cpp third_party/upb/upb third_party/xxhash -type f \( -name '*.h' -o -name '*.inc' \) \
      -exec cp --parents -t "$prefix/include/grpc-core/" {} +)
}
build_googletest() {
  cmake_install googletest "$1" -Dgtest_force_shared_crt=OFF
}
build_fmt() {
  cmake_install fmt "$1" -DFMT_DOC=OFF -DFMT_TEST=OFF
}
build_spdlog() {
  # As Debian builds it: a compiled library over the external fmt.
  cmake_install spdlog "$1" -DSPDLOG_FMT_EXTERNAL=ON -DSPDLOG_BUILD_EXAMPLE=OFF -DSPDLOG_BUILD_TESTS=OFF
}
build_cli11() {
  cmake_install cli11 "$1" -DCLI11_BUILD_TESTS=OFF -DCLI11_BUILD_EXAMPLES=OFF -DCLI11_BUILD_DOCS=OFF
}
build_civetweb() {
  # As Debian builds it (the C++ wrapper, websockets), less TLS: the metrics listener serves plain HTTP, and
  # there is no OpenSSL for Windows here.
  cmake_install civetweb "$1" -DCIVETWEB_BUILD_TESTING=OFF -DCIVETWEB_ENABLE_CXX=ON -DCIVETWEB_ENABLE_WEBSOCKETS=ON \
    -DCIVETWEB_ENABLE_SSL=OFF -DCIVETWEB_ENABLE_SERVER_EXECUTABLE=OFF -DCIVETWEB_INSTALL_EXECUTABLE=OFF \
    -DCIVETWEB_ENABLE_ASAN=OFF
}
build_prometheus() {
  # As Debian builds it, over the civetweb above; the host uses the core and pull libraries only.
  cmake_install prometheus "$1" -DUSE_THIRDPARTY_LIBRARIES=OFF -DENABLE_PUSH=OFF -DENABLE_COMPRESSION=OFF \
    -DENABLE_TESTING=OFF -DGENERATE_PKGCONFIG=OFF
}
install_tomlplusplus() {
  # Header-only: the headers of the Linux build's libtomlplusplus-dev and a package file for its target.
  cp -a /usr/include/toml++ "$prefix/include/"
  mkdir -p "$prefix/lib/cmake/tomlplusplus"
  cat >"$prefix/lib/cmake/tomlplusplus/tomlplusplusConfig.cmake" <<'EOF'
# toml++ header-only (TOML_HEADER_ONLY defaults to 1), written by csi-proxy's scripts/windows/build-deps.sh.
if(NOT TARGET tomlplusplus::tomlplusplus)
  add_library(tomlplusplus::tomlplusplus INTERFACE IMPORTED)
  set_target_properties(tomlplusplus::tomlplusplus PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${CMAKE_CURRENT_LIST_DIR}/../../../include")
endif()
EOF
  echo "set(PACKAGE_VERSION ${toml_version%%+*})
set(PACKAGE_VERSION_COMPATIBLE TRUE)" >"$prefix/lib/cmake/tomlplusplus/tomlplusplusConfigVersion.cmake"
}

say "building the Windows dependencies into $prefix (jobs: $jobs; logs: $top/logs)"
start=$(date +%s)
info=$top/BUILD-INFO
{
  echo "key $key"
  echo "compiler $($compiler --version | head -1)"
  echo "jobs $jobs"
  echo "load-at-start $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$info"
for line in "${components[@]}"; do
  read -r name _ <<<"$line"
  t0=$(date +%s)
  say "$name ${version[$name]}"
  src=$(src_dir "$name")
  apply_patches "$name" "$src"
  if ! "build_$name" "$src"; then
    say "$name failed; the end of $top/logs/$name.log:"
    tail -n 40 "$top/logs/$name.log" >&2
    exit 1
  fi
  rm -rf "$top/build/$name" "$src"
  echo "$name ${version[$name]} $(($(date +%s) - t0))s" >>"$info"
done
install_tomlplusplus
echo "toml++ $toml_version (headers)" >>"$info"
# Boost's headers are the same for both systems; the prefix points at the Linux build's.
ln -s /usr/include/boost "$prefix/include/boost"
echo "boost $boost_version (headers, linked)" >>"$info"
end=$(date +%s)
{
  echo "total $((end - start))s"
  echo "load-at-end $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "size $(du -sh "$prefix" | cut -f1)"
} >>"$info"
rm -rf "$top/build"
touch "$prefix/.complete"
say "done in $((end - start)) s: $(tail -n1 "$info")"

if [ "$prune" = 1 ]; then
  for other in "$root"/*/; do
    other=${other%/}
    case "$other" in "$top" | "$root/sources") continue ;; esac
    say "pruning $other"
    rm -rf "$other"
  done
fi
echo "$prefix"

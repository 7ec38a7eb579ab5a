#!/usr/bin/env bash
# Installs every Debian package the build, the tests and the benchmarks need.
# Idempotent: packages already present are skipped, so a warm machine pays one dpkg query.
set -euo pipefail

build_pkgs=(
  build-essential cmake pkg-config ccache
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev libprotoc-dev protobuf-compiler
  libboost-dev libspdlog-dev libtomlplusplus-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libblkid-dev libfdisk-dev libmount-dev libsystemd-dev
  # An isolated group's runner confines itself (capability sets, a system call filter); the test of the
  # non-blocking methods traps on the system calls they must never make.
  libcap-dev libseccomp-dev
  prometheus-cpp-dev grpc-proto
  clang libclang-rt-14-dev
  # The Windows build (scripts/windows/build-deps.sh) and its tests under Wine.
  g++-mingw-w64-x86-64-posix wine64 ninja-build dpkg-dev unicode-data
)
# Programs the plugins exec or the end-to-end tests use as real peers.
runtime_pkgs=(
  util-linux fdisk e2fsprogs xfsprogs dosfstools
  samba smbclient cifs-utils tgt open-iscsi
  dbus systemd logrotate
  python3-grpcio python3-h2
)

want=("${build_pkgs[@]}")
[ "${1:-}" = "--build-only" ] || want+=("${runtime_pkgs[@]}")
# The Kubernetes manifests' validator (deploy/validate) runs on node and npm: Debian's, unless a node with npm is
# already installed (another node's npm would conflict with Debian's package).
[ "${1:-}" = "--build-only" ] || command -v npm >/dev/null || want+=(nodejs npm)

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# Debian's source archive, from which the Windows lane cross-builds its dependencies (scripts/windows/build-deps.sh),
# goes in before the one apt-get update, which then covers it too.
sources_file=/etc/apt/sources.list.d/csi-proxy-deb-src.sources
new_sources=0
if [ "$(id -u)" -eq 0 ] && ! cmp -s "$(dirname "$0")/windows/deb-src.sources" "$sources_file"; then
  cp "$(dirname "$0")/windows/deb-src.sources" "$sources_file"
  new_sources=1
fi
[ ${#missing[@]} -eq 0 ] && [ "$new_sources" = 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages ${missing[*]}; run as root to install them" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# Packaged daemons (smbd, tgtd, iscsid) must not start at install time: tests start their own on loopback.
policy=/usr/sbin/policy-rc.d
made_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && made_policy=1
fi
trap '[ "$made_policy" = 1 ] && rm -f "$policy"' EXIT
apt-get update -qq
[ ${#missing[@]} -eq 0 ] || apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

#!/usr/bin/env bash
# The release zip as an admin uses it on a node, under Wine (the Windows lane's fresh prefix): extracted into
# C:\csi-proxy-release, its layout checked (csi-proxy.exe at the top, as upstream's release has it), the service
# installed and started from there by install.cmd, serving every group the default configuration enables,
# csi-proxyctl.exe from the zip calling the filesystem, system, smb and iscsi groups through the service's pipes,
# then the service stopped and removed by uninstall.cmd. Nothing of the build tree is used but the zip; what the
# test made is removed, also when it fails.
#
#   tests/windows/release_test.sh ZIP SOURCE_DIR      (inside scripts/windows/wine-session.sh)
set -euo pipefail
zip=$1
source_dir=$2
[ -n "${WINEPREFIX:-}" ] || { echo "release_test.sh: run it inside scripts/windows/wine-session.sh" >&2; exit 2; }
wine=${CSI_PROXY_WINE_DIR:-/usr/lib/wine}/wine64
drive=$WINEPREFIX/drive_c
dir=$drive/csi-proxy-release
win_dir='C:\csi-proxy-release'
made=()  # what to remove at the end, made here

fail() {
  echo "release_test.sh: $*" >&2
  exit 1
}
cleanup() {
  "$wine" cmd /c "$win_dir\\uninstall.cmd" >/dev/null 2>&1 || true
  rm -rf "$dir" "${made[@]}"
}
trap cleanup EXIT
# The kubelet path given to install.cmd, and the default configuration's state_dir.
for d in "$drive/var" "$drive/ProgramData/csi-proxy"; do
  [ -e "$d" ] || made+=("$d")
done
mkdir -p "$drive/var/lib/kubelet-release"

rm -rf "$dir"
mkdir -p "$dir"
(cd "$dir" && cmake -E tar xf "$zip")

# What a node runs at the top, the SDK below sdk\; nothing else of the build.
for f in csi-proxy.exe csi-proxyctl.exe csi-proxy-filesystem.dll csi-proxy-system.dll csi-proxy-disk.dll \
  csi-proxy-volume.dll csi-proxy-smb.dll csi-proxy-iscsi.dll csi-proxy.toml install.cmd uninstall.cmd sdk/include/csi_proxy/plugin_abi.h sdk/include/csi_proxy/testing/fake_host.hpp \
  sdk/lib/cmake/CsiProxySdk/CsiProxySdkConfig.cmake sdk/lib/cmake/CsiProxySdk/mingw-w64-x86_64.cmake \
  sdk/lib/cmake/CsiProxySdk/tools/protoc-gen-csi-proxy.cc; do
  [ -f "$dir/$f" ] || fail "the zip has no $f"
done
unexpected=$(cd "$dir" && find . -type f \( -name '*test*' -o -name 'csi-proxy-echo.dll' -o -name 'send_ctrl_c.exe' \
  -o -name 'lib*.dll' -o -name '*.a' \))
[ -z "$unexpected" ] || fail "the zip holds files a node does not need: $unexpected"
cmp -s "$dir/csi-proxy.toml" "$source_dir/config/csi-proxy-windows.toml" ||
  fail "csi-proxy.toml is not config/csi-proxy-windows.toml"
grep -q $'\r$' "$dir/install.cmd" || fail "install.cmd does not have Windows line ends"

# Installed and started as an admin does it on a node: install.cmd in the extracted directory, with one of upstream's
# flags, which reaches the check and the service's command line.
if ! out=$("$wine" cmd /c "$win_dir\\install.cmd" '-kubelet-path=C:\var\lib\kubelet-release' 2>&1); then
  # Right after wineboot, Wine's SCM is still starting its own services one at a time and may time a start out
  # (error 1053); the service then connects late. Asked again, as groups_test does.
  grep -q "1053" <<<"$out" || fail "install.cmd failed: $out"
  for _ in $(seq 12); do
    "$wine" sc.exe start csiproxy >/dev/null 2>&1 && break
    sleep 5
  done
fi
echo "$out"
for _ in $(seq 120); do
  "$wine" sc.exe query csiproxy 2>/dev/null | grep -q RUNNING && break
  sleep 0.5
done
"$wine" sc.exe query csiproxy | grep -q RUNNING || fail "the service does not run: $("$wine" sc.exe query csiproxy)
$(cat "$dir/csi-proxy.log" 2>/dev/null)"

ctl() { "$wine" "$win_dir\\csi-proxyctl.exe" "$@" 2>&1; }
status=$(ctl status) || fail "csi-proxyctl.exe status: $status"
for group in filesystem system disk volume smb iscsi; do
  grep -q "group $group ($group): serving" <<<"$status" || fail "the service does not serve $group: $status"
done
answer=$(ctl call csi-proxy-filesystem-v1 PathExists '{"path": "C:\\var\\lib\\kubelet-release"}') ||
  fail "PathExists over the pipe: $answer"
grep -q '"exists": true' <<<"$answer" || fail "PathExists of the kubelet path: $answer"
answer=$(ctl call csi-proxy-filesystem-v1 PathExists '{"path": "C:\\var\\lib\\kubelet"}') &&
  fail "PathExists outside -kubelet-path was answered: $answer"
grep -q "PERMISSION_DENIED" <<<"$answer" || fail "PathExists outside -kubelet-path: $answer"
answer=$(ctl call csi-proxy-system-v1alpha1 GetBIOSSerialNumber '{}') || fail "GetBIOSSerialNumber: $answer"
# Wine has no SMB client's WMI and no iSCSI initiator: the groups answer UNIMPLEMENTED, naming what is missing.
lacks() {  # MISSING PIPE METHOD REQUEST
  local missing=$1 answer
  shift
  answer=$(ctl call "$@") && fail "$2 succeeded under Wine: $answer"
  grep -q "UNIMPLEMENTED" <<<"$answer" && grep -qF "$missing" <<<"$answer" || fail "$2: $answer"
}
lacks 'ROOT\Microsoft\Windows\SMB' csi-proxy-smb-v1 RemoveSmbGlobalMapping '{"remote_path": "\\\\srv\\share"}'
lacks 'MSFT_iSCSI' csi-proxy-iscsi-v1alpha2 ListTargetPortals '{}'
[ -s "$dir/csi-proxy.log" ] || fail "the service wrote no log at $win_dir\\csi-proxy.log (install.cmd's -log_file)"

out=$("$wine" cmd /c "$win_dir\\uninstall.cmd" 2>&1) || fail "uninstall.cmd failed: $out"
if "$wine" sc.exe query csiproxy >/dev/null 2>&1; then fail "the service is still installed after uninstall.cmd"; fi
grep -q "received a service stop; stopping" "$dir/csi-proxy.log" || fail "no graceful stop in the log:
$(cat "$dir/csi-proxy.log")"
gone=$(ctl status) && fail "csi-proxyctl.exe status still answers after uninstall.cmd: $gone"
grep -q "no admin pipe" <<<"$gone" || fail "csi-proxyctl.exe status after uninstall.cmd: $gone"
echo "release_test.sh: $(basename "$zip"): extracted, installed, served, removed"

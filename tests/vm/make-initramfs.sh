#!/usr/bin/env bash
# Builds the VM lane's initramfs from the installed kernel: a static busybox, the modules the guest needs to mount
# the host's root over virtio 9p with a tmpfs overlay on top, and tests/vm/init as /init.
# usage: tests/vm/make-initramfs.sh KERNEL_VERSION OUTPUT.cpio.gz
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
kver=$1
out=$2

busybox=/bin/busybox  # Debian's busybox-static: no shared libraries needed in the initramfs
[ -x "$busybox" ] || { echo "make-initramfs: no $busybox (Debian package busybox-static)" >&2; exit 1; }

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage"/{bin,dev,proc,sys,modules,lower,rw,newroot}
cp "$busybox" "$stage/bin/busybox"
cp "$here/init" "$stage/init"
chmod 755 "$stage/init"

# The modules in load order, each once: virtio transport, 9p over virtio, overlayfs.
: >"$stage/modules/order"
for module in virtio_pci 9pnet_virtio 9p overlay; do
  modprobe -S "$kver" --show-depends "$module" | while read -r verb path _; do
    [ "$verb" = insmod ] || continue
    name=$(basename "$path")
    grep -qx "$name" "$stage/modules/order" && continue
    cp "$path" "$stage/modules/$name"
    echo "$name" >>"$stage/modules/order"
  done
done

(cd "$stage" && find . -print0 | cpio --null -o -H newc --quiet) | gzip -1 >"$out.tmp"
mv "$out.tmp" "$out"

#!/usr/bin/env bash
# In the VM lane's guest (tests/vm/record-disk-ids.sh runs it): copies the sysfs attributes that identify each
# disk into <results>/disk-ids/<disk>/, as files named like the attributes (relative to /sys/class/block/<name>),
# plus `name`, `device-name` (the last component of the device link: a SCSI address, nvme0, virtio2) and
# `device-subsystem`. Binary attributes (VPD pages) are copied byte for byte.
set -euo pipefail
results=$1
out=$results/disk-ids
mkdir -p "$out"
modprobe -a virtio_blk virtio_scsi sd_mod nvme loop
truncate -s 64M /tmp/loop-backing.img
losetup -f /tmp/loop-backing.img
for _ in $(seq 60); do  # without udev the disks appear as their drivers probe them
  [ "$(ls /sys/class/block | grep -cE '^(sd[a-z]|vd[a-z]|nvme0n[0-9])$')" -ge 6 ] && break
  sleep 1
done

label() {  # which disk of record-disk-ids.sh this is
  local name=$1 device=$2
  case "$name:$device" in
    sd*:*:*:*:3) echo scsi-naa-lun3 ;;
    sd*) echo scsi-t10 ;;
    nvme*n1:*) echo nvme-eui64 ;;
    nvme*n2:*) echo nvme-no-namespace-id ;;
    loop*) echo loop ;;
    vd*) if [ -e "/sys/class/block/$name/serial" ] && [ -n "$(cat "/sys/class/block/$name/serial")" ]; then
        echo virtio-blk-serial
      else
        echo virtio-blk-no-serial
      fi ;;
  esac
}

for sys in /sys/class/block/*; do
  name=$(basename "$sys")
  [ -e "$sys/partition" ] && continue
  [ "$(cat "$sys/size")" != 0 ] || continue
  device=
  [ -e "$sys/device" ] && device=$(basename "$(readlink -f "$sys/device")")
  disk=$(label "$name" "$device")
  [ -n "$disk" ] || continue
  dir=$out/$disk
  mkdir -p "$dir/device"
  echo "$name" >"$dir/name"
  if [ -n "$device" ]; then
    echo "$device" >"$dir/device-name"
    basename "$(readlink -f "$sys/device/subsystem")" >"$dir/device-subsystem"
  fi
  for attr in dev size diskseq wwid eui nguid uuid serial removable loop/backing_file loop/offset \
    device/vpd_pg80 device/vpd_pg83 device/state device/serial device/model device/vendor device/wwid \
    device/firmware_rev; do
    if [ -r "$sys/$attr" ] && cat "$sys/$attr" >/dev/null 2>&1; then
      mkdir -p "$(dirname "$dir/$attr")"
      cat "$sys/$attr" >"$dir/$attr"
    fi
  done
  rmdir "$dir/device" 2>/dev/null || true
  echo "$disk: $name ${device:+($device)}"
done

#!/usr/bin/env bash
# Records what identifies real disks in sysfs (what ListDiskIDs and ListDiskLocations read) from the virtio, SCSI
# and NVMe disks QEMU presents to the VM lane's guest, into tests/plugins/common/disk_identities/<disk>/: the
# fixtures of the identity tests (tests/plugins/common/disk_identities_test.cc). Run it again after changing the
# disks below; the fixtures' README says which disk is which.
#   tests/vm/record-disk-ids.sh [--build DIR]
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
build=build
[ "${1:-}" = --build ] && build=$2
build=$(cd "$build" && pwd)

images=$build/vm/disk-id-images
mkdir -p "$images"
for disk in scsi-naa-lun3 scsi-t10 nvme-ns1 nvme-ns2 virtio-serial virtio-plain; do
  truncate -s 64M "$images/$disk.img"
done
drive() { echo "if=none,id=$1,file=$images/$1.img,format=raw"; }
args=(
  # SCSI (virtio-scsi): an NAA designator first (device_id empty), at LUN 3, as a VMware or Azure data disk is
  # found by its page 83 or its LUN; and a vendor-specific ASCII designator first, as GCE's "Google <name>".
  --qemu-arg -device --qemu-arg virtio-scsi-pci,id=scsi0
  --qemu-arg -drive --qemu-arg "$(drive scsi-naa-lun3)"
  --qemu-arg -device --qemu-arg "scsi-hd,drive=scsi-naa-lun3,bus=scsi0.0,channel=0,scsi-id=1,lun=3,serial=SER-LUN3,device_id=,wwn=0x5000c50015ea71ac"
  --qemu-arg -drive --qemu-arg "$(drive scsi-t10)"
  --qemu-arg -device --qemu-arg "scsi-hd,drive=scsi-t10,bus=scsi0.0,channel=0,scsi-id=2,lun=0,serial=persistent-disk-1,device_id=Google  persistent-disk-1,vendor=Google,product=PersistentDisk"
  # NVMe: a namespace with an EUI-64 (GCE's NVMe disks: the EUI is the namespace identifier) and one without any
  # namespace identifier (an EBS volume on Nitro: the controller's serial is the volume id without its dash).
  --qemu-arg -device --qemu-arg nvme,id=nvme0,serial=vol0123456789abcdef0
  --qemu-arg -drive --qemu-arg "$(drive nvme-ns1)"
  --qemu-arg -device --qemu-arg "nvme-ns,drive=nvme-ns1,bus=nvme0,nsid=1,eui64=0x10cc9636b6e3ce3b,uuid=00000000-0000-0000-0000-000000000000"
  --qemu-arg -drive --qemu-arg "$(drive nvme-ns2)"
  --qemu-arg -device --qemu-arg "nvme-ns,drive=nvme-ns2,bus=nvme0,nsid=2,uuid=00000000-0000-0000-0000-000000000000"
  # virtio-blk with and without a serial.
  --qemu-arg -drive --qemu-arg "$(drive virtio-serial)"
  --qemu-arg -device --qemu-arg virtio-blk-pci,drive=virtio-serial,serial=virtio-disk-serial-1
  --qemu-arg -drive --qemu-arg "$(drive virtio-plain)"
  --qemu-arg -device --qemu-arg virtio-blk-pci,drive=virtio-plain
)
bash tests/vm/run.sh --build "$build" --timeout 300 "${args[@]}" --run tests/vm/guest-record-disk-ids.sh

out=tests/plugins/common/disk_identities
recorded=$build/vm/results/disk-ids
[ -d "$recorded" ] || { echo "record-disk-ids: the guest recorded nothing" >&2; exit 1; }
for dir in "$recorded"/*/; do
  name=$(basename "$dir")
  rm -rf "${out:?}/$name"
  mkdir -p "$out/$name"
  cp -r "$dir". "$out/$name/"
  echo "recorded $out/$name"
done

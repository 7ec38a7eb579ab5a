// The identifiers of a whole disk from its sysfs attributes; see disk_identifiers_linux.h.
#include "disk_identifiers_linux.h"

namespace csi_proxy::common {

DiskIdentifiers ReadDiskIdentifiers(const DiskAttributeReader& read) {
  DiskIdentifiers ids;
  if (auto pg83 = read("device/vpd_pg83", true)) ids.page83 = SelectPage83Identifier(*pg83);
  auto eui = read("eui", false);
  auto nguid = read("nguid", false);
  if (ids.page83.empty() && (eui || nguid)) ids.page83 = NvmePage83Identifier(eui.value_or(""), nguid.value_or(""));
  if (auto pg80 = read("device/vpd_pg80", true)) {
    ids.serial_number = ParseVpdSerial(*pg80);
  } else if (auto controller = read("device/serial", false)) {  // NVMe: the controller's serial
    ids.serial_number = *controller;
  } else if (auto virtio = read("serial", false)) {  // virtio-blk
    ids.serial_number = *virtio;
  }
  return ids;
}

}  // namespace csi_proxy::common

// Which sysfs attributes of a whole disk give the identifiers ListDiskIDs reports (device_naming.h parses them).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "device_naming.h"

namespace csi_proxy::common {

// Reads one attribute of a whole disk relative to its sysfs directory (/sys/class/block/<name>): "device/vpd_pg83",
// "serial", ...; the content without its trailing newline (with it, and any bytes, when `raw`), or nullopt when the
// attribute does not exist or cannot be read.
using DiskAttributeReader = std::function<std::optional<std::string>(const char* name, bool raw)>;

// The identifiers of a whole disk from its sysfs attributes, by kind:
//   SCSI (device/vpd_pg83, device/vpd_pg80): page 0x83 by upstream's rule, serial from page 0x80;
//   NVMe (eui, nguid, device/serial of the controller): NvmePage83Identifier, the controller's serial;
//   virtio-blk (serial): no page 0x83, its serial;
//   anything else (loop, device-mapper, RAM disks): nothing.
DiskIdentifiers ReadDiskIdentifiers(const DiskAttributeReader& read);

}  // namespace csi_proxy::common

// How the API names disks, read from the text the kernel and the devices give: disk numbers, SCSI addresses,
// page 0x83 identifiers and serial numbers. Pure parsing, no I/O; block_device_scan_linux.h reads the text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "csi_proxy/status.hpp"

namespace csi_proxy::common {

// SCSI host:channel:target:lun, from the name of /sys/block/<dev>/device.
struct ScsiAddress {
  uint32_t host = 0;
  uint32_t channel = 0;
  uint32_t target = 0;
  uint64_t lun = 0;
};

struct DiskIdentifiers {
  std::string page83;         // per SelectPage83Identifier; "" when the device has no VPD page 0x83
  std::string serial_number;  // untrimmed, as the device reports it; "" when it has none
};

// "H:C:T:L" (the name of a SCSI device in sysfs) -> address; nullopt if it is not one.
std::optional<ScsiAddress> ParseScsiAddress(std::string_view text);

// Upstream's page 0x83 rule: among the designation descriptors of a VPD page 0x83, the first whose association is
// "addressed logical unit" (0) and whose code set is binary (1, returned as lowercase hex) or ASCII (2, returned
// as the raw bytes) wins, whatever its designator type. "" when none qualifies or the page is malformed.
std::string SelectPage83Identifier(std::string_view vpd_page);

// The product serial number of a VPD page 0x80 (bytes 4 .. 4+length), untrimmed. "" when malformed.
std::string ParseVpdSerial(std::string_view vpd_page);

// A disk number written as decimal text, as older API versions carry it ("7"). INVALID_ARGUMENT for anything
// else: empty, signs, spaces, other digits, values beyond uint32.
StatusOr<uint32_t> ParseDiskNumber(std::string_view text);

}  // namespace csi_proxy::common

// How the API names disks, parsed from the text and bytes the kernel and the devices give: disk numbers, SCSI
// addresses, page 0x83 identifiers and serial numbers. Pure parsing, no I/O, the same on every system;
// disk_identifiers_linux.h says which sysfs attributes they come from on Linux.
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

// What ListDiskIDs reports for a disk, in the forms drivers written for Windows match (docs/disk-identities.md).
struct DiskIdentifiers {
  std::string page83;         // SCSI: per SelectPage83Identifier; NVMe: per NvmePage83Identifier; else ""
  std::string serial_number;  // untrimmed, as the device reports it; "" when it has none
};

// "H:C:T:L" (the name of a SCSI device in sysfs) -> address; nullopt if it is not one.
std::optional<ScsiAddress> ParseScsiAddress(std::string_view text);

// Upstream's page 0x83 rule: among the designation descriptors of a VPD page 0x83, the first whose association is
// "addressed logical unit" (0) and whose code set is binary (1, returned as lowercase hex) or ASCII (2, returned
// as the raw bytes) wins, whatever its designator type. "" when none qualifies or the page is malformed.
std::string SelectPage83Identifier(std::string_view vpd_page);

// That rule on one designator, wherever it was read from (a VPD page, Windows' STORAGE_DEVICE_ID_DESCRIPTOR): the
// page 0x83 text when the designator qualifies, nullopt when it does not.
std::optional<std::string> Page83Text(uint32_t code_set, uint32_t association, std::string_view designator);

// The page 0x83 text of an NVMe namespace, from its sysfs `eui` (the EUI-64 as "10 cc 96 36 b6 e3 ce 3b") and
// `nguid` (the NGUID as "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"): "eui." and the lowercase hex digits of the EUI-64
// when it is set (not all zeros), else of the NGUID; "" when neither is set or readable. This is the form the
// kernel's `wwid` uses and GCE's driver matches (a Page83 starting with "eui.").
std::string NvmePage83Identifier(std::string_view eui, std::string_view nguid);

// The product serial number of a VPD page 0x80 (bytes 4 .. 4+length), untrimmed. "" when malformed.
std::string ParseVpdSerial(std::string_view vpd_page);

// A Windows volume GUID path, the form upstream's volume IDs take (MSFT_Volume.UniqueId, FindFirstVolume):
// \\?\Volume{xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx}\ (in any case; the trailing backslash optional). The
// canonical form is written so, with lowercase digits and the trailing backslash. nullopt for anything else.
std::optional<std::string> CanonicalVolumeGuidPath(std::string_view text);

// A disk number written as decimal text, as older API versions carry it ("7"). INVALID_ARGUMENT for anything
// else: empty, signs, spaces, other digits, values beyond uint32.
StatusOr<uint32_t> ParseDiskNumber(std::string_view text);

}  // namespace csi_proxy::common

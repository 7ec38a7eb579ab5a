// The SMBIOS system serial number from a raw SMBIOS table, as Windows hands it out (GetSystemFirmwareTable('RSMB'):
// a RawSMBIOSData header, then the structure table). Pure and portable, so it is unit-tested on Linux with
// recorded tables; bios_serial_windows.cc feeds it the machine's table.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "csi_proxy/status.hpp"

namespace csi_proxy::system {

// The Serial Number string of the first System Information structure (type 1, offset 07h): what Windows reports
// as Win32_BIOS.SerialNumber, and Linux as /sys/class/dmi/id/product_serial. Returned as the firmware wrote it;
// a structure that names no string (index 0) gives "". FAILED_PRECONDITION when the table has no type 1
// structure; INVALID_ARGUMENT when the data is malformed (a structure or its strings run past the table's end).
StatusOr<std::string> SystemSerialFromRawSmbios(std::span<const uint8_t> raw_smbios_data);

// The same for the structure table alone (no RawSMBIOSData header).
StatusOr<std::string> SystemSerialFromSmbiosTable(std::span<const uint8_t> table);

}  // namespace csi_proxy::system

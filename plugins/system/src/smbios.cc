// The SMBIOS structure walk; see smbios.h and the DMTF's SMBIOS specification (DSP0134), section 6.1
// (structure layout) and 7.2 (System Information).
#include "smbios.h"

#include <cstring>

namespace csi_proxy::system {
namespace {

constexpr size_t kRawHeaderSize = 8;        // Used20CallingMethod, major, minor, DMI revision, DWORD Length
constexpr size_t kStructureHeaderSize = 4;  // type, length, handle
constexpr uint8_t kSystemInformation = 1;
constexpr uint8_t kEndOfTable = 127;
constexpr size_t kSerialNumberOffset = 0x07;

}  // namespace

StatusOr<std::string> SystemSerialFromRawSmbios(std::span<const uint8_t> raw_smbios_data) {
  if (raw_smbios_data.size() < kRawHeaderSize) return InvalidArgument("the SMBIOS data is shorter than its header");
  uint32_t length;
  std::memcpy(&length, raw_smbios_data.data() + 4, sizeof length);  // little-endian, as on every Windows machine
  if (length > raw_smbios_data.size() - kRawHeaderSize) {
    return InvalidArgument("the SMBIOS data says its table has " + std::to_string(length) + " bytes, but holds " +
                           std::to_string(raw_smbios_data.size() - kRawHeaderSize));
  }
  return SystemSerialFromSmbiosTable(raw_smbios_data.subspan(kRawHeaderSize, length));
}

StatusOr<std::string> SystemSerialFromSmbiosTable(std::span<const uint8_t> table) {
  size_t at = 0;
  while (at + kStructureHeaderSize <= table.size()) {
    const uint8_t type = table[at];
    const size_t formatted = table[at + 1];
    if (formatted < kStructureHeaderSize || at + formatted > table.size()) {
      return InvalidArgument("SMBIOS structure of type " + std::to_string(type) + " at offset " + std::to_string(at) +
                             " runs past the end of the table");
    }
    // The strings follow the formatted area, each NUL-terminated, the set ended by a second NUL (two NULs when
    // there is no string at all).
    const size_t strings = at + formatted;
    size_t end = strings;
    while (end + 1 < table.size() && !(table[end] == 0 && table[end + 1] == 0)) ++end;
    if (end + 1 >= table.size()) {
      return InvalidArgument("the strings of SMBIOS structure of type " + std::to_string(type) + " at offset " +
                             std::to_string(at) + " are not terminated");
    }
    if (type == kSystemInformation) {
      if (formatted <= kSerialNumberOffset) return std::string();  // too old a structure to have a serial
      const uint8_t index = table[at + kSerialNumberOffset];
      if (index == 0) return std::string();
      const char* text = reinterpret_cast<const char*>(table.data());
      size_t s = strings;
      for (uint8_t i = 1; s < end; ++i) {
        if (i == index) return std::string(text + s);
        s += std::strlen(text + s) + 1;  // within the table: the string set ends with a NUL at `end`
      }
      return InvalidArgument("the SMBIOS system serial names string " + std::to_string(index) +
                             ", which does not exist");
    }
    if (type == kEndOfTable) break;
    at = end + 2;
  }
  return FailedPrecondition("the SMBIOS table has no System Information structure (type 1)");
}

}  // namespace csi_proxy::system

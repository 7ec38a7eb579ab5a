// Parsers of the storage IOCTLs' answers; see storage_ioctl.h. Offsets follow Microsoft's structure definitions
// for x64 (natural alignment).
#include "storage_ioctl.h"

#include <algorithm>
#include <cstdio>

#include "device_naming.h"

namespace csi_proxy::common::ioctl {
namespace {

uint16_t Le16(std::span<const uint8_t> d, size_t at) { return static_cast<uint16_t>(d[at] | (d[at + 1] << 8)); }
uint32_t Le32(std::span<const uint8_t> d, size_t at) {
  return d[at] | (d[at + 1] << 8) | (d[at + 2] << 16) | (uint32_t{d[at + 3]} << 24);
}
uint64_t Le64(std::span<const uint8_t> d, size_t at) { return Le32(d, at) | (uint64_t{Le32(d, at + 4)} << 32); }

// A NUL-terminated string at `offset` (0: absent), within the first `size` bytes.
std::string StringAt(std::span<const uint8_t> d, uint32_t offset, size_t size) {
  if (offset == 0 || offset >= size) return {};
  std::string text;
  for (size_t i = offset; i < size && d[i] != 0; ++i) text.push_back(static_cast<char>(d[i]));
  return text;
}

}  // namespace

std::vector<uint8_t> PropertyQuery(uint32_t property_id) {
  // STORAGE_PROPERTY_QUERY: PropertyId, QueryType (PropertyStandardQuery = 0), AdditionalParameters[1]; 12 bytes.
  std::vector<uint8_t> query(12, 0);
  for (int i = 0; i < 4; ++i) query[static_cast<size_t>(i)] = static_cast<uint8_t>(property_id >> (8 * i));
  return query;
}

std::optional<DeviceNumber> ParseDeviceNumber(std::span<const uint8_t> data) {
  if (data.size() < 12) return std::nullopt;
  return DeviceNumber{Le32(data, 0), Le32(data, 4), Le32(data, 8)};
}

uint32_t DescriptorSize(std::span<const uint8_t> data) { return data.size() < 8 ? 0 : Le32(data, 4); }

std::optional<DeviceDescriptor> ParseDeviceDescriptor(std::span<const uint8_t> data) {
  // Version, Size, DeviceType, DeviceTypeModifier, RemovableMedia, CommandQueueing (bytes 8-11), VendorIdOffset 12,
  // ProductIdOffset 16, ProductRevisionOffset 20, SerialNumberOffset 24, BusType 28, RawPropertiesLength 32.
  if (data.size() < 32) return std::nullopt;
  const size_t size = std::min<size_t>(data.size(), DescriptorSize(data));
  DeviceDescriptor d;
  d.bus_type = Le32(data, 28);
  d.vendor = StringAt(data, Le32(data, 12), size);
  d.product = StringAt(data, Le32(data, 16), size);
  d.serial_number = StringAt(data, Le32(data, 24), size);
  return d;
}

std::string Page83FromDeviceIdDescriptor(std::span<const uint8_t> data) {
  // STORAGE_DEVICE_ID_DESCRIPTOR: Version, Size, NumberOfIdentifiers, Identifiers at 12. Each STORAGE_IDENTIFIER:
  // CodeSet 0, Type 4, IdentifierSize (16 bits) 8, NextOffset (16 bits, from this identifier) 10, Association 12,
  // Identifier bytes at 16.
  if (data.size() < 12) return {};
  const size_t end = std::min<size_t>(data.size(), Le32(data, 4));
  const uint32_t count = Le32(data, 8);
  size_t at = 12;
  for (uint32_t i = 0; i < count && at + 16 <= end; ++i) {
    const uint32_t code_set = Le32(data, at);
    const uint16_t length = Le16(data, at + 8);
    const uint16_t next = Le16(data, at + 10);
    const uint32_t association = Le32(data, at + 12);
    if (at + 16 + length > end) break;
    std::string designator(reinterpret_cast<const char*>(data.data() + at + 16), length);
    if (auto text = Page83Text(code_set, association, designator)) return *text;
    if (next == 0) break;
    at += next;
  }
  return {};
}

std::optional<ScsiAddress> ParseScsiAddress(std::span<const uint8_t> data) {
  // SCSI_ADDRESS: Length (32 bits), PortNumber, PathId, TargetId, Lun (bytes).
  if (data.size() < 8) return std::nullopt;
  return ScsiAddress{data[4], data[5], data[6], data[7]};
}

std::optional<uint64_t> ParseDiskSize(std::span<const uint8_t> data) {
  // DISK_GEOMETRY_EX: DISK_GEOMETRY (24 bytes), DiskSize at 24.
  if (data.size() < 32) return std::nullopt;
  return Le64(data, 24);
}

std::optional<uint64_t> ParseDiskAttributes(std::span<const uint8_t> data) {
  // GET_DISK_ATTRIBUTES: Version, Reserved1, Attributes at 8.
  if (data.size() < 16) return std::nullopt;
  return Le64(data, 8);
}

std::optional<std::vector<DiskExtent>> ParseVolumeDiskExtents(std::span<const uint8_t> data) {
  // VOLUME_DISK_EXTENTS: NumberOfDiskExtents, then DISK_EXTENTs at 8, 24 bytes each: DiskNumber 0,
  // StartingOffset 8, ExtentLength 16.
  if (data.size() < 8) return std::nullopt;
  const uint32_t count = Le32(data, 0);
  if (data.size() < 8 + size_t{count} * 24) return std::nullopt;
  std::vector<DiskExtent> extents;
  for (uint32_t i = 0; i < count; ++i) {
    const size_t at = 8 + size_t{i} * 24;
    extents.push_back(DiskExtent{Le32(data, at), Le64(data, at + 8), Le64(data, at + 16)});
  }
  return extents;
}

std::string GuidText(std::span<const uint8_t, 16> g) {
  char text[37];
  std::snprintf(text, sizeof text, "%08x-%04x-%04x-%02x%02x-%02x%02x%02x%02x%02x%02x", Le32(g, 0), Le16(g, 4),
                Le16(g, 6), g[8], g[9], g[10], g[11], g[12], g[13], g[14], g[15]);
  return text;
}

std::optional<PartitionInfo> ParsePartitionInfo(std::span<const uint8_t> data) {
  // PARTITION_INFORMATION_EX: PartitionStyle 0, StartingOffset 8, PartitionLength 16, PartitionNumber 24,
  // RewritePartition 28, IsServicePartition 29, then at 32 the MBR part (PartitionType byte, BootIndicator,
  // RecognizedPartition, HiddenSectors at 36, PartitionId at 40) or the GPT part (PartitionType GUID 32,
  // PartitionId 48, Attributes 64, Name 72).
  if (data.size() < 48) return std::nullopt;
  PartitionInfo info;
  const uint32_t style = Le32(data, 0);
  if (style > 2) return std::nullopt;
  info.style = static_cast<PartitionInfo::Style>(style);
  info.offset = Le64(data, 8);
  info.length = Le64(data, 16);
  info.number = Le32(data, 24);
  if (info.style == PartitionInfo::Style::kMbr) {
    info.mbr_type = data[32];
  } else if (info.style == PartitionInfo::Style::kGpt) {
    if (data.size() < 72) return std::nullopt;
    info.gpt_type = GuidText(data.subspan(32).first<16>());
    info.gpt_attributes = Le64(data, 64);
  }
  return info;
}

}  // namespace csi_proxy::common::ioctl

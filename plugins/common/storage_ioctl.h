// The storage IOCTLs the disk and volume groups use on Windows: their control codes, the input buffers they take
// and parsers of the buffers they answer with. Written from Microsoft's documentation of each structure as byte
// offsets (x64 layout, little-endian), so they are portable and unit-tested on Linux with recorded buffers; the
// Windows build checks the codes and sizes against winioctl.h (storage_system_windows.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace csi_proxy::common::ioctl {

// Control codes (CTL_CODE(device type, function, method, access)).
inline constexpr uint32_t kStorageGetDeviceNumber = 0x002D1080;      // FILE_ANY_ACCESS
inline constexpr uint32_t kStorageQueryProperty = 0x002D1400;        // FILE_ANY_ACCESS
inline constexpr uint32_t kScsiGetAddress = 0x00041018;              // FILE_ANY_ACCESS
inline constexpr uint32_t kDiskGetDriveGeometryEx = 0x000700A0;      // FILE_ANY_ACCESS
inline constexpr uint32_t kDiskGetPartitionInfoEx = 0x00070048;      // FILE_ANY_ACCESS
inline constexpr uint32_t kDiskGetDiskAttributes = 0x000700F0;       // FILE_ANY_ACCESS; not in MinGW's headers
inline constexpr uint32_t kVolumeGetVolumeDiskExtents = 0x00560000;  // FILE_ANY_ACCESS

inline constexpr uint32_t kFileDeviceDisk = 7;  // STORAGE_DEVICE_NUMBER.DeviceType of a disk

// STORAGE_PROPERTY_ID values.
inline constexpr uint32_t kStorageDeviceProperty = 0;
inline constexpr uint32_t kStorageDeviceIdProperty = 2;

// A STORAGE_PROPERTY_QUERY for a property's standard query (the input of kStorageQueryProperty).
std::vector<uint8_t> PropertyQuery(uint32_t property_id);

// STORAGE_DEVICE_NUMBER: what a disk or a partition's volume is numbered by.
struct DeviceNumber {
  uint32_t device_type = 0;
  uint32_t device_number = 0;
  uint32_t partition_number = 0;  // 0 for a whole disk
};
std::optional<DeviceNumber> ParseDeviceNumber(std::span<const uint8_t> data);

// STORAGE_DEVICE_DESCRIPTOR's strings (absent ones empty) and bus type.
struct DeviceDescriptor {
  uint32_t bus_type = 0;
  std::string vendor;
  std::string product;
  std::string serial_number;  // as the device reports it: untrimmed
};
std::optional<DeviceDescriptor> ParseDeviceDescriptor(std::span<const uint8_t> data);
// The size the descriptor says it has (its Size member), to ask again with a buffer that large; 0 if unreadable.
uint32_t DescriptorSize(std::span<const uint8_t> data);

// The page 0x83 text of a STORAGE_DEVICE_ID_DESCRIPTOR (the device's VPD page 0x83 identifiers as Windows hands
// them over), by upstream's rule (device_naming.h Page83Text on each STORAGE_IDENTIFIER in order); "" when none
// qualifies or the buffer is malformed.
std::string Page83FromDeviceIdDescriptor(std::span<const uint8_t> data);

// SCSI_ADDRESS: port (the adapter), path (the bus), target and LUN.
struct ScsiAddress {
  uint32_t port = 0;
  uint32_t path = 0;
  uint32_t target = 0;
  uint32_t lun = 0;
};
std::optional<ScsiAddress> ParseScsiAddress(std::span<const uint8_t> data);

// DISK_GEOMETRY_EX's DiskSize: the disk's size in bytes.
std::optional<uint64_t> ParseDiskSize(std::span<const uint8_t> data);

// GET_DISK_ATTRIBUTES' Attributes.
inline constexpr uint64_t kDiskAttributeOffline = 0x1;
inline constexpr uint64_t kDiskAttributeReadOnly = 0x2;
std::optional<uint64_t> ParseDiskAttributes(std::span<const uint8_t> data);

// VOLUME_DISK_EXTENTS: where a volume lies.
struct DiskExtent {
  uint32_t disk_number = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
};
std::optional<std::vector<DiskExtent>> ParseVolumeDiskExtents(std::span<const uint8_t> data);

// PARTITION_INFORMATION_EX of a partition (or of a basic volume, which is one).
struct PartitionInfo {
  enum class Style { kMbr = 0, kGpt = 1, kRaw = 2 };
  Style style = Style::kRaw;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint32_t number = 0;
  uint8_t mbr_type = 0;         // MBR only
  std::string gpt_type;         // GPT only: lowercase 8-4-4-4-12
  uint64_t gpt_attributes = 0;  // GPT only
};
std::optional<PartitionInfo> ParsePartitionInfo(std::span<const uint8_t> data);

// A GUID as Windows lays it out in memory (Data1-3 little-endian, Data4 as bytes), as lowercase 8-4-4-4-12 text.
std::string GuidText(std::span<const uint8_t, 16> guid);

}  // namespace csi_proxy::common::ioctl

// IOCTL answers for recorded_storage.h, laid out with the system's own structures (winioctl.h, ntddscsi.h), so
// that they also check plugins/common/storage_ioctl.h's hand-written offsets; and the MSFT_* instances the
// Storage Management API documents, with the properties the groups read.
#pragma once

#include <windows.h>

#include <ntddscsi.h>
#include <winioctl.h>

#include <cstring>
#include <string>
#include <vector>

#include "wmi.h"

namespace csi_proxy::testing {

template <typename T>
std::vector<uint8_t> Bytes(const T& value) {
  std::vector<uint8_t> bytes(sizeof value);
  std::memcpy(bytes.data(), &value, sizeof value);
  return bytes;
}

inline std::vector<uint8_t> DeviceNumberAnswer(DWORD number, DWORD partition = 0, DWORD type = FILE_DEVICE_DISK) {
  STORAGE_DEVICE_NUMBER n{};
  n.DeviceType = type;
  n.DeviceNumber = number;
  n.PartitionNumber = partition;
  return Bytes(n);
}

// A STORAGE_DEVICE_DESCRIPTOR with its strings after it; an empty string is absent (offset 0).
inline std::vector<uint8_t> DeviceDescriptorAnswer(const std::string& serial, const std::string& vendor = "",
                                                   const std::string& product = "") {
  STORAGE_DEVICE_DESCRIPTOR d{};
  std::vector<uint8_t> bytes(sizeof d);
  auto add = [&](const std::string& s) -> DWORD {
    if (s.empty()) return 0;
    DWORD at = static_cast<DWORD>(bytes.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
    bytes.push_back(0);
    return at;
  };
  d.Version = sizeof d;
  d.VendorIdOffset = add(vendor);
  d.ProductIdOffset = add(product);
  d.SerialNumberOffset = add(serial);
  d.BusType = BusTypeScsi;
  d.Size = static_cast<DWORD>(bytes.size());
  std::memcpy(bytes.data(), &d, sizeof d);
  return bytes;
}

struct Designator {
  STORAGE_IDENTIFIER_CODE_SET code_set;
  STORAGE_IDENTIFIER_TYPE type;
  STORAGE_ASSOCIATION_TYPE association;
  std::string bytes;
};

inline std::vector<uint8_t> DeviceIdAnswer(const std::vector<Designator>& designators) {
  std::vector<uint8_t> bytes(offsetof(STORAGE_DEVICE_ID_DESCRIPTOR, Identifiers));
  for (const auto& d : designators) {
    const size_t at = bytes.size();
    const size_t next = (offsetof(STORAGE_IDENTIFIER, Identifier) + d.bytes.size() + 7) / 8 * 8;
    bytes.resize(at + next);
    STORAGE_IDENTIFIER id{};
    id.CodeSet = d.code_set;
    id.Type = d.type;
    id.IdentifierSize = static_cast<USHORT>(d.bytes.size());
    id.NextOffset = static_cast<USHORT>(next);
    id.Association = d.association;
    std::memcpy(bytes.data() + at, &id, offsetof(STORAGE_IDENTIFIER, Identifier));
    std::memcpy(bytes.data() + at + offsetof(STORAGE_IDENTIFIER, Identifier), d.bytes.data(), d.bytes.size());
  }
  STORAGE_DEVICE_ID_DESCRIPTOR head{};
  head.Version = sizeof head;
  head.Size = static_cast<DWORD>(bytes.size());
  head.NumberOfIdentifiers = static_cast<DWORD>(designators.size());
  std::memcpy(bytes.data(), &head, offsetof(STORAGE_DEVICE_ID_DESCRIPTOR, Identifiers));
  return bytes;
}

inline std::vector<uint8_t> ScsiAddressAnswer(UCHAR port, UCHAR path, UCHAR target, UCHAR lun) {
  SCSI_ADDRESS a{};
  a.Length = sizeof a;
  a.PortNumber = port;
  a.PathId = path;
  a.TargetId = target;
  a.Lun = lun;
  return Bytes(a);
}

inline std::vector<uint8_t> GeometryAnswer(uint64_t size) {
  DISK_GEOMETRY_EX g{};
  g.Geometry.BytesPerSector = 512;
  g.Geometry.MediaType = FixedMedia;
  g.DiskSize.QuadPart = static_cast<LONGLONG>(size);
  return Bytes(g);
}

inline std::vector<uint8_t> AttributesAnswer(DWORDLONG attributes) {
  struct {
    DWORD Version;
    DWORD Reserved1;
    DWORDLONG Attributes;
  } a{16, 0, attributes};  // GET_DISK_ATTRIBUTES, which MinGW does not declare
  return Bytes(a);
}

inline std::vector<uint8_t> GptPartitionAnswer(DWORD number, const GUID& type, DWORD64 attributes = 0) {
  PARTITION_INFORMATION_EX p{};
  p.PartitionStyle = PARTITION_STYLE_GPT;
  p.PartitionNumber = number;
  p.StartingOffset.QuadPart = 1 << 20;
  p.PartitionLength.QuadPart = 1LL << 30;
  p.Gpt.PartitionType = type;
  p.Gpt.Attributes = attributes;
  return Bytes(p);
}

inline std::vector<uint8_t> MbrPartitionAnswer(DWORD number, BYTE type) {
  PARTITION_INFORMATION_EX p{};
  p.PartitionStyle = PARTITION_STYLE_MBR;
  p.PartitionNumber = number;
  p.Mbr.PartitionType = type;
  return Bytes(p);
}

namespace msft {

namespace wmi = ::csi_proxy::common::wmi;

// MSFT_Disk with the properties the groups read; PartitionStyle 0 RAW, 1 MBR, 2 GPT.
inline wmi::Object Disk(uint32_t number, int64_t partition_style, bool offline = false) {
  return wmi::Object("MSFT_Disk", "MSFT_Disk.ObjectId=\"{disk-" + std::to_string(number) + "}\"",
                     {{"Number", int64_t{number}},
                      {"PartitionStyle", partition_style},
                      {"IsOffline", offline},
                      {"IsReadOnly", false},
                      {"Size", std::string("10737418240")},
                      {"ObjectId", "{disk-" + std::to_string(number) + "}"}});
}

// MSFT_Partition; a GPT partition has a GptType ("{...}"), an MBR one an MbrType.
inline wmi::Object GptPartition(uint32_t disk, uint32_t number, const std::string& gpt_type, uint64_t size,
                                bool offline = false) {
  const std::string id = "{part-" + std::to_string(disk) + "-" + std::to_string(number) + "}";
  return wmi::Object("MSFT_Partition", "MSFT_Partition.ObjectId=\"" + id + "\"",
                     {{"DiskNumber", int64_t{disk}},
                      {"PartitionNumber", int64_t{number}},
                      {"GptType", gpt_type},
                      {"MbrType", wmi::Value()},
                      {"Size", std::to_string(size)},
                      {"IsOffline", offline},
                      {"ObjectId", id}});
}

inline wmi::Object MbrPartition(uint32_t disk, uint32_t number, int64_t mbr_type, uint64_t size) {
  const std::string id = "{part-" + std::to_string(disk) + "-" + std::to_string(number) + "}";
  return wmi::Object("MSFT_Partition", "MSFT_Partition.ObjectId=\"" + id + "\"",
                     {{"DiskNumber", int64_t{disk}},
                      {"PartitionNumber", int64_t{number}},
                      {"GptType", wmi::Value()},
                      {"MbrType", mbr_type},
                      {"Size", std::to_string(size)},
                      {"IsOffline", false},
                      {"ObjectId", id}});
}

inline wmi::Object Volume(const std::string& unique_id, int64_t file_system_type) {
  return wmi::Object("MSFT_Volume", "MSFT_Volume.ObjectId=\"" + unique_id + "\"",
                     {{"UniqueId", unique_id}, {"FileSystemType", file_system_type}, {"ObjectId", unique_id}});
}

inline constexpr const char* kBasicData = "{ebd0a0a2-b9e5-4433-87c0-68b6b72699c7}";
inline constexpr const char* kMicrosoftReserved = "{e3c9e316-0b5c-4db8-817d-f92df00215ae}";

}  // namespace msft
}  // namespace csi_proxy::testing

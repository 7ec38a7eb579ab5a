// What is on a device, as libblkid probes it: filesystem and other signatures, and the entries of a partition
// table as written on the disk (not the kernel's view of them, which block_device_scan_linux.h reads).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "csi_proxy/status.hpp"

namespace csi_proxy::common {

// What libblkid recognises on a device.
struct Signatures {
  std::string fs_type;  // TYPE: "ext4", "xfs", "LVM2_member", "swap", ...; "" when there is none
  std::string usage;    // USAGE: "filesystem", "raid", "crypto", "other"
  std::string uuid;
  std::string label;
  std::string pt_type;      // PTTYPE: "gpt", "dos"; "" without a partition table
  bool ambivalent = false;  // several conflicting signatures: treat the device as holding data
  bool Empty() const { return fs_type.empty() && pt_type.empty() && !ambivalent; }
};

// One entry of a disk's partition table as libblkid reads it.
struct PartitionEntry {
  uint32_t number = 0;
  std::string type;  // GPT type GUID (lowercase) or a dos type as "0x83"
  bool is_extended = false;
  uint64_t start_bytes = 0;
  uint64_t size_bytes = 0;
};

// GPT type GUID of the Microsoft Reserved partition, which upstream never reports as a volume.
inline constexpr std::string_view kMicrosoftReservedGuid = "e3c9e316-0b5c-4db8-817d-f92df00215ae";

// libblkid low-level probe of a device (filesystems, RAID/LVM members, swap, partition tables).
StatusOr<Signatures> ProbeSignatures(const std::string& device_path);

// What a probe found, for messages: "a filesystem of type ext4 (UUID ...)", "a signature of type LVM2_member",
// "several conflicting signatures", "a partition table of type gpt" or "nothing".
std::string DescribeSignatures(const Signatures& sig);

// The partition table entries of a disk as libblkid reads them from the disk (not the kernel's view).
StatusOr<std::vector<PartitionEntry>> ReadPartitionEntries(const std::string& disk_path);

}  // namespace csi_proxy::common

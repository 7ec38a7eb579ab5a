// The parsers of Windows' storage IOCTL answers (plugins/common/storage_ioctl.h), on buffers Wine answered with
// (recorded under Wine 8 from \\.\PhysicalDrive0 and its volumes) and on buffers laid out by hand from Microsoft's
// structure definitions; malformed and short buffers never read past their end.
#include "storage_ioctl.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace csi_proxy::common::ioctl {
namespace {

std::vector<uint8_t> Hex(const std::string& text) {
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i + 1 < text.size();) {
    if (text[i] == ' ') {
      ++i;
      continue;
    }
    bytes.push_back(static_cast<uint8_t>(std::stoi(text.substr(i, 2), nullptr, 16)));
    i += 2;
  }
  return bytes;
}

void Put32(std::vector<uint8_t>& d, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) d[at + static_cast<size_t>(i)] = static_cast<uint8_t>(v >> (8 * i));
}
void Put16(std::vector<uint8_t>& d, size_t at, uint16_t v) {
  d[at] = static_cast<uint8_t>(v);
  d[at + 1] = static_cast<uint8_t>(v >> 8);
}

// A STORAGE_DEVICE_ID_DESCRIPTOR with identifiers of (code set, association, bytes), each padded to 8 bytes.
struct Identifier {
  uint32_t code_set;
  uint32_t type;
  uint32_t association;
  std::string bytes;
};
std::vector<uint8_t> DeviceIdDescriptor(const std::vector<Identifier>& ids) {
  std::vector<uint8_t> d(12, 0);
  for (const auto& id : ids) {
    size_t at = d.size();
    size_t next = (16 + id.bytes.size() + 7) / 8 * 8;
    d.resize(at + next, 0);
    Put32(d, at, id.code_set);
    Put32(d, at + 4, id.type);
    Put16(d, at + 8, static_cast<uint16_t>(id.bytes.size()));
    Put16(d, at + 10, static_cast<uint16_t>(next));
    Put32(d, at + 12, id.association);
    std::copy(id.bytes.begin(), id.bytes.end(), d.begin() + static_cast<long>(at + 16));
  }
  Put32(d, 0, 12);
  Put32(d, 4, static_cast<uint32_t>(d.size()));
  Put32(d, 8, static_cast<uint32_t>(ids.size()));
  return d;
}

TEST(StorageIoctl, PropertyQueryIsAStandardQueryOfTheProperty) {
  EXPECT_EQ(PropertyQuery(kStorageDeviceIdProperty), Hex("02000000 00000000 00000000"));
}

TEST(StorageIoctl, DeviceNumbersOfWinesDiskAndItsVolume) {
  auto disk = ParseDeviceNumber(Hex("07000000 00000000 00000000"));
  ASSERT_TRUE(disk);
  EXPECT_EQ(disk->device_type, kFileDeviceDisk);
  EXPECT_EQ(disk->device_number, 0u);
  EXPECT_EQ(disk->partition_number, 0u);
  auto volume = ParseDeviceNumber(Hex("07000000 03000000 02000000"));
  EXPECT_EQ(volume->device_number, 3u);
  EXPECT_EQ(volume->partition_number, 2u);
  EXPECT_FALSE(ParseDeviceNumber(Hex("07000000 03000000")));
}

TEST(StorageIoctl, WinesDeviceDescriptorHasABusTypeAndNoStrings) {
  auto d = ParseDeviceDescriptor(
      Hex("28000000 28000000 07000000 00000000 00000000 00000000 00000000 01000000 00000000 00000000"));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->bus_type, 1u);  // BusTypeScsi
  EXPECT_EQ(d->serial_number, "");
  EXPECT_EQ(d->vendor, "");
}

TEST(StorageIoctl, DeviceDescriptorStringsComeFromTheirOffsetsUntrimmed) {
  std::vector<uint8_t> d(40, 0);
  auto add = [&](const std::string& s) {
    uint32_t at = static_cast<uint32_t>(d.size());
    d.insert(d.end(), s.begin(), s.end());
    d.push_back(0);
    return at;
  };
  Put32(d, 12, add("Msft    "));
  Put32(d, 16, add("Virtual Disk    "));
  Put32(d, 24, add("  vol0123456789abcdef0 "));
  Put32(d, 28, 0x11);  // BusTypeNvme
  Put32(d, 0, 40);
  Put32(d, 4, static_cast<uint32_t>(d.size()));
  auto parsed = ParseDeviceDescriptor(d);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->vendor, "Msft    ");
  EXPECT_EQ(parsed->product, "Virtual Disk    ");
  EXPECT_EQ(parsed->serial_number, "  vol0123456789abcdef0 ");
  EXPECT_EQ(parsed->bus_type, 0x11u);

  // A descriptor cut short by a small buffer: offsets past the end give nothing, and Size says what to ask for.
  std::vector<uint8_t> cut(d.begin(), d.begin() + 52);
  parsed = ParseDeviceDescriptor(cut);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->vendor, "Msft    ");
  EXPECT_EQ(parsed->serial_number, "");
  EXPECT_EQ(DescriptorSize(cut), d.size());
  // A serial with no terminating NUL ends at the descriptor's end.
  std::vector<uint8_t> unterminated(d.begin(), d.end() - 1);
  Put32(unterminated, 4, static_cast<uint32_t>(unterminated.size()));
  EXPECT_EQ(ParseDeviceDescriptor(unterminated)->serial_number, "  vol0123456789abcdef0 ");
}

TEST(StorageIoctl, Page83IsTheFirstLogicalUnitDesignatorInBinaryOrAscii) {
  // As upstream's GetDiskPage83ID: identifiers of the port (association 1) and UTF-8 ones are skipped; binary is
  // lowercase hex, ASCII as it is (the T10 vendor id of a GCE persistent disk keeps its padded vendor field).
  auto d = DeviceIdDescriptor({{1, 3, 1, std::string("\x50\x01\x40\x50", 4)},
                               {3, 8, 0, "iqn.utf8"},
                               {2, 1, 0, "Google  persistent-disk-1"},
                               {1, 3, 0, std::string("\x60\x00\xc2\x9a", 4)}});
  EXPECT_EQ(Page83FromDeviceIdDescriptor(d), "Google  persistent-disk-1");
  d = DeviceIdDescriptor({{1, 3, 0, std::string("\x50\x00\xc5\x00\x15\xea\x71\xac", 8)}});
  EXPECT_EQ(Page83FromDeviceIdDescriptor(d), "5000c50015ea71ac");
}

TEST(StorageIoctl, Page83OfNothingOrOfMalformedDescriptorsIsEmpty) {
  EXPECT_EQ(Page83FromDeviceIdDescriptor(DeviceIdDescriptor({})), "");
  EXPECT_EQ(Page83FromDeviceIdDescriptor(DeviceIdDescriptor({{1, 3, 2, "target"}})), "");
  auto d = DeviceIdDescriptor({{2, 1, 0, "Google  persistent-disk-1"}});
  Put16(d, 12 + 8, 400);  // an identifier longer than the buffer
  EXPECT_EQ(Page83FromDeviceIdDescriptor(d), "");
  Put32(d, 8, 1000);  // more identifiers than there are
  Put16(d, 12 + 8, 4);
  EXPECT_EQ(Page83FromDeviceIdDescriptor(d), "Goog");
  EXPECT_EQ(Page83FromDeviceIdDescriptor(Hex("0c000000 40")), "");
}

TEST(StorageIoctl, ScsiAddressIsPortPathTargetLun) {
  auto a = ParseScsiAddress(Hex("08000000 01 00 00 03"));
  ASSERT_TRUE(a);
  EXPECT_EQ(a->port, 1u);
  EXPECT_EQ(a->path, 0u);
  EXPECT_EQ(a->target, 0u);
  EXPECT_EQ(a->lun, 3u);
  EXPECT_FALSE(ParseScsiAddress(Hex("08000000 01 00")));
}

TEST(StorageIoctl, WinesDiskGeometryGivesTheDiskSize) {
  auto size =
      ParseDiskSize(Hex("10270000 00000000 0c000000 ff000000 3f000000 00020000 0020a626 13000000 00000000 00000000"));
  ASSERT_TRUE(size);
  EXPECT_EQ(*size, 82252800000u);
  EXPECT_FALSE(ParseDiskSize(Hex("10270000 00000000 0c000000 ff000000 3f000000 00020000")));
}

TEST(StorageIoctl, DiskAttributesCarryTheOfflineAndReadOnlyBits) {
  auto attributes = ParseDiskAttributes(Hex("10000000 00000000 03000000 00000000"));
  ASSERT_TRUE(attributes);
  EXPECT_TRUE(*attributes & kDiskAttributeOffline);
  EXPECT_TRUE(*attributes & kDiskAttributeReadOnly);
  EXPECT_FALSE(ParseDiskAttributes(Hex("10000000 00000000")));
}

TEST(StorageIoctl, VolumeDiskExtents) {
  EXPECT_TRUE(ParseVolumeDiskExtents(Hex("00000000 00000000"))->empty());  // Wine's answer
  auto one = ParseVolumeDiskExtents(Hex("01000000 00000000 02000000 00000000 00001000 00000000 00000040 00000000"));
  ASSERT_TRUE(one);
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ(one->front().disk_number, 2u);
  EXPECT_EQ(one->front().offset, 0x100000u);
  EXPECT_EQ(one->front().length, 0x40000000u);
  EXPECT_FALSE(ParseVolumeDiskExtents(Hex("02000000 00000000 02000000 00000000")));
}

TEST(StorageIoctl, GptPartitionInfoNamesItsTypeAsWindowsWritesGuids) {
  std::vector<uint8_t> d(144, 0);
  Put32(d, 0, 1);    // PARTITION_STYLE_GPT
  d[8 + 2] = 0x10;   // StartingOffset 1 MiB
  d[16 + 3] = 0x40;  // PartitionLength 1 GiB
  Put32(d, 24, 1);
  const auto esp = Hex("28732ac1 1ff8 d211 ba4b 00a0c93ec93b");
  std::copy(esp.begin(), esp.end(), d.begin() + 32);
  d[64] = 0x01;  // GPT_ATTRIBUTE_PLATFORM_REQUIRED
  auto info = ParsePartitionInfo(d);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->style, PartitionInfo::Style::kGpt);
  EXPECT_EQ(info->gpt_type, "c12a7328-f81f-11d2-ba4b-00a0c93ec93b");
  EXPECT_EQ(info->gpt_attributes, 1u);
  EXPECT_EQ(info->offset, 1u << 20);
  EXPECT_EQ(info->length, 1u << 30);
  EXPECT_EQ(info->number, 1u);
}

TEST(StorageIoctl, MbrPartitionInfoNamesItsType) {
  std::vector<uint8_t> d(144, 0);
  Put32(d, 24, 2);
  d[32] = 0x07;
  auto info = ParsePartitionInfo(d);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->style, PartitionInfo::Style::kMbr);
  EXPECT_EQ(info->mbr_type, 7u);
  EXPECT_EQ(info->number, 2u);
  Put32(d, 0, 9);
  EXPECT_FALSE(ParsePartitionInfo(d));
  EXPECT_FALSE(ParsePartitionInfo(Hex("01000000")));
}

}  // namespace
}  // namespace csi_proxy::common::ioctl

// The SMBIOS parser of the Windows backend (plugins/system/src/smbios.h), on recorded and hand-made tables: the
// system serial from the System Information structure, and refusals of malformed data.
#include "smbios.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace csi_proxy::system {
namespace {

using ::testing::HasSubstr;

// GetSystemFirmwareTable('RSMB') as Wine 8 answered it on a machine without DMI: a BIOS structure (type 0), a
// System Information structure (type 1) whose strings are all absent (index 0), a baseboard, a chassis, a
// processor-less table and the end marker.
const std::vector<uint8_t> kRecordedUnderWine = {
    0x00, 0x02, 0x04, 0x00, 0x7b, 0x00, 0x00, 0x00, 0x00, 0x18, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x01, 0x1b, 0x01, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x3d, 0x12, 0x19, 0xc7, 0xc4, 0xc5, 0x40, 0x4a, 0xaa, 0x1f, 0x6d, 0x2a, 0x48, 0xad, 0xfd,
    0xa4, 0x02, 0x00, 0x00, 0x00, 0x00, 0x03, 0x15, 0x02, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x02, 0x02, 0x02, 0x02,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x02, 0x0f, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x05, 0x00, 0x02, 0x00, 0x0a, 0x00, 0x00, 0x00, 0x20, 0x14, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x7f, 0x04, 0x05, 0x00, 0x00, 0x00};

void Append(std::vector<uint8_t>& out, std::initializer_list<uint8_t> bytes) {
  for (uint8_t b : bytes) out.push_back(b);
}
void AppendStrings(std::vector<uint8_t>& out, std::initializer_list<std::string> strings) {
  for (const std::string& s : strings) {
    out.insert(out.end(), s.begin(), s.end());
    out.push_back(0);
  }
  if (strings.size() == 0) out.push_back(0);
  out.push_back(0);
}

// A table as a cloud VM's firmware writes one (SMBIOS 2.8): a BIOS structure with its vendor and version, then a
// System Information structure whose serial is its fourth string, then the end marker.
std::vector<uint8_t> VmTable(uint8_t serial_index = 4) {
  std::vector<uint8_t> t;
  Append(t, {0x00, 0x12, 0x00, 0x00, 0x01, 0x02, 0x00, 0xf0, 0x03, 0xff, 0, 0, 0, 0, 0, 0, 0, 0});
  AppendStrings(t, {"Google", "Google", "10/23/2024"});
  Append(t, {0x01, 0x1b, 0x01, 0x00, 0x01, 0x02, 0x03, serial_index, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66,
             0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee,         0xff, 0x00, 0x06, 0x05, 0x06});
  AppendStrings(t, {"Google", "Google Compute Engine", "pc-q35", "GoogleCloud-2F3C9A7E1D5B", "SKU", "Family"});
  Append(t, {0x7f, 0x04, 0xff, 0xff});
  AppendStrings(t, {});
  return t;
}

std::vector<uint8_t> WithRawHeader(const std::vector<uint8_t>& table) {
  std::vector<uint8_t> raw = {0x00, 0x02, 0x08, 0x00};
  const uint32_t length = static_cast<uint32_t>(table.size());
  for (int i = 0; i < 4; ++i) raw.push_back(static_cast<uint8_t>(length >> (8 * i)));
  raw.insert(raw.end(), table.begin(), table.end());
  return raw;
}

TEST(Smbios, TheSerialIsTheSystemInformationStructuresSerialString) {
  auto serial = SystemSerialFromRawSmbios(WithRawHeader(VmTable()));
  ASSERT_TRUE(serial.ok()) << serial.status().message();
  EXPECT_EQ(*serial, "GoogleCloud-2F3C9A7E1D5B");
}

TEST(Smbios, AStructureThatNamesNoSerialGivesAnEmptySerial) {
  auto serial = SystemSerialFromRawSmbios(kRecordedUnderWine);
  ASSERT_TRUE(serial.ok()) << serial.status().message();
  EXPECT_EQ(*serial, "");
  EXPECT_EQ(*SystemSerialFromSmbiosTable(VmTable(/*serial_index=*/0)), "");
}

TEST(Smbios, AnyStringOfTheSetCanBeTheSerial) {
  EXPECT_EQ(*SystemSerialFromSmbiosTable(VmTable(1)), "Google");
  EXPECT_EQ(*SystemSerialFromSmbiosTable(VmTable(6)), "Family");
}

TEST(Smbios, ASerialIndexPastTheStringsIsMalformed) {
  auto serial = SystemSerialFromSmbiosTable(VmTable(7));
  EXPECT_EQ(serial.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(serial.status().message(), HasSubstr("string 7"));
}

TEST(Smbios, ATableWithoutSystemInformationHasNoSerial) {
  std::vector<uint8_t> t;
  Append(t, {0x00, 0x12, 0x00, 0x00, 0x01, 0x02, 0x00, 0xf0, 0x03, 0xff, 0, 0, 0, 0, 0, 0, 0, 0});
  AppendStrings(t, {"Vendor", "1.0"});
  Append(t, {0x7f, 0x04, 0xff, 0xff});
  AppendStrings(t, {});
  EXPECT_EQ(SystemSerialFromSmbiosTable(t).status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(SystemSerialFromSmbiosTable({}).status().code(), Code::kFailedPrecondition);
}

TEST(Smbios, TruncatedDataIsRefusedNotReadPastItsEnd) {
  const std::vector<uint8_t> table = VmTable();
  // Every cut inside the System Information structure or its strings.
  for (size_t cut = 48; cut < table.size() - 6; ++cut) {
    auto serial = SystemSerialFromSmbiosTable(std::vector<uint8_t>(table.begin(), table.begin() + cut));
    EXPECT_EQ(serial.status().code(), Code::kInvalidArgument) << "cut at " << cut;
  }
  std::vector<uint8_t> raw = WithRawHeader(table);
  ASSERT_FALSE(raw.empty());
  raw.pop_back();  // the header says one byte more than there is
  EXPECT_EQ(SystemSerialFromRawSmbios(raw).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(SystemSerialFromRawSmbios(std::vector<uint8_t>{0, 2, 8}).status().code(), Code::kInvalidArgument);
}

TEST(Smbios, AStructureShorterThanItsHeaderIsMalformed) {
  std::vector<uint8_t> t = {0x01, 0x02, 0x00, 0x00, 0x00, 0x00};
  EXPECT_EQ(SystemSerialFromSmbiosTable(t).status().code(), Code::kInvalidArgument);
}

TEST(Smbios, AnOldSystemInformationStructureWithoutASerialFieldGivesAnEmptySerial) {
  std::vector<uint8_t> t;
  Append(t, {0x01, 0x07, 0x01, 0x00, 0x01, 0x02, 0x00});  // SMBIOS 2.0 minus the serial byte
  AppendStrings(t, {"Maker", "Model"});
  EXPECT_EQ(*SystemSerialFromSmbiosTable(t), "");
}

}  // namespace
}  // namespace csi_proxy::system

// How disks are named: SCSI addresses, page 0x83 identifiers and serials parsed from the bytes devices give.
#include "device_naming.h"

#include <gtest/gtest.h>

#include <string>

#include "fake_sysfs.h"

namespace csi_proxy::common {
namespace {

using testing::Designator;
using testing::VpdPage;

TEST(ParseScsiAddress, ReadsHostChannelTargetLun) {
  auto a = ParseScsiAddress("2:0:1:17");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->host, 2u);
  EXPECT_EQ(a->channel, 0u);
  EXPECT_EQ(a->target, 1u);
  EXPECT_EQ(a->lun, 17u);
}

TEST(ParseScsiAddress, RejectsNamesThatAreNotAddresses) {
  EXPECT_FALSE(ParseScsiAddress("virtio1"));
  EXPECT_FALSE(ParseScsiAddress("1:2:3"));
  EXPECT_FALSE(ParseScsiAddress("1:2:3:x"));
  EXPECT_FALSE(ParseScsiAddress("1:2:3:4:5"));
  EXPECT_FALSE(ParseScsiAddress(""));
}

TEST(SelectPage83Identifier, TakesTheFirstLunBinaryDesignatorAsLowercaseHex) {
  std::string naa = "\x60\x01\x40\x5a\xbc\xde\xf0\x12";
  auto page = VpdPage(0x83, Designator(2, 1, 8, "target-port-name") +  // association 1: not the LUN
                                Designator(1, 0, 3, naa) + Designator(2, 0, 1, "LATER"));
  EXPECT_EQ(SelectPage83Identifier(page), "6001405abcdef012");
}

TEST(SelectPage83Identifier, ReturnsAsciiDesignatorsAsRawUntrimmedBytes) {
  auto page = VpdPage(0x83, Designator(2, 0, 1, "Google  persistent-disk-0 "));
  EXPECT_EQ(SelectPage83Identifier(page), "Google  persistent-disk-0 ");
}

TEST(SelectPage83Identifier, IgnoresUtf8AndOtherAssociations) {
  auto page = VpdPage(0x83, Designator(3, 0, 8, "utf8-name") + Designator(1, 2, 3, "\x01\x02"));
  EXPECT_EQ(SelectPage83Identifier(page), "");
}

TEST(SelectPage83Identifier, SurvivesTruncatedAndEmptyPages) {
  EXPECT_EQ(SelectPage83Identifier(""), "");
  EXPECT_EQ(SelectPage83Identifier(std::string("\x00\x83\x00", 3)), "");
  auto page = VpdPage(0x83, Designator(1, 0, 3, "\x11\x22\x33\x44"));
  EXPECT_EQ(SelectPage83Identifier(page.substr(0, page.size() - 1)), "");  // descriptor runs past the end
}

TEST(ParseVpdSerial, ReturnsTheSerialUntrimmed) {
  EXPECT_EQ(ParseVpdSerial(VpdPage(0x80, "  SER123  ")), "  SER123  ");
  EXPECT_EQ(ParseVpdSerial(""), "");
}

// Windows' volume IDs, as upstream hands them out (MSFT_Volume.UniqueId).
TEST(CanonicalVolumeGuidPath, AcceptsVolumeGuidPathsWithOrWithoutTheTrailingBackslash) {
  const std::string canonical = "\\\\?\\Volume{452e318a-5cde-421e-9831-b9853c521012}\\";
  EXPECT_EQ(CanonicalVolumeGuidPath(canonical), canonical);
  EXPECT_EQ(CanonicalVolumeGuidPath("\\\\?\\Volume{452E318A-5CDE-421E-9831-B9853C521012}"), canonical);
  EXPECT_EQ(CanonicalVolumeGuidPath("\\\\?\\VOLUME{452E318A-5CDE-421E-9831-B9853C521012}\\"), canonical);
}

TEST(CanonicalVolumeGuidPath, RefusesEverythingElse) {
  for (const char* id :
       {"", "/dev/sdb1", "C:\\", "Volume{452e318a-5cde-421e-9831-b9853c521012}",
        "\\\\.\\Volume{452e318a-5cde-421e-9831-b9853c521012}\\", "\\\\?\\Volume{452e318a-5cde-421e-9831-b9853c52101}\\",
        "\\\\?\\Volume{452e318a5cde-421e-9831-b9853c5210123}\\",
        "\\\\?\\Volume{452e318a-5cde-421e-9831-b9853c52101g}\\",
        "\\\\?\\Volume{452e318a-5cde-421e-9831-b9853c521012}\\\\",
        "\\\\?\\Volume{452e318a-5cde-421e-9831-b9853c521012}\\x"}) {
    EXPECT_FALSE(CanonicalVolumeGuidPath(id)) << id;
  }
}

}  // namespace
}  // namespace csi_proxy::common

// Windows reparse point data as bytes (plugins/common/reparse_data.h), the part of the Windows resolver that runs
// anywhere: symlinks (absolute and relative), junctions, volume mount points, other tags, malformed data, and the
// symlink data CreateSymlink writes read back.
#include "reparse_data.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace csi_proxy::common {
namespace {

void Put16(std::vector<uint8_t>& d, uint32_t v) {
  d.push_back(static_cast<uint8_t>(v));
  d.push_back(static_cast<uint8_t>(v >> 8));
}
void Put32(std::vector<uint8_t>& d, uint32_t v) {
  Put16(d, v & 0xFFFF);
  Put16(d, v >> 16);
}
void PutText(std::vector<uint8_t>& d, std::u16string_view text) {
  for (char16_t c : text) Put16(d, c);
}

// A REPARSE_DATA_BUFFER as Windows fills it: print name first here (the order is free), then the substitute name.
std::vector<uint8_t> Buffer(uint32_t tag, std::u16string_view substitute, std::u16string_view print,
                            std::optional<uint32_t> symlink_flags) {
  std::vector<uint8_t> names;
  PutText(names, print);
  PutText(names, substitute);
  std::vector<uint8_t> d;
  Put32(d, tag);
  Put16(d, static_cast<uint32_t>((symlink_flags ? 12 : 8) + names.size()));
  Put16(d, 0);
  Put16(d, static_cast<uint32_t>(print.size() * 2));       // substitute name offset
  Put16(d, static_cast<uint32_t>(substitute.size() * 2));  // substitute name length
  Put16(d, 0);                                             // print name offset
  Put16(d, static_cast<uint32_t>(print.size() * 2));
  if (symlink_flags) Put32(d, *symlink_flags);
  d.insert(d.end(), names.begin(), names.end());
  return d;
}

TEST(ReparseData, AnAbsoluteSymlinkNamesItsTargetWithoutTheNtPrefix) {
  auto point = ParseReparsePoint(Buffer(kReparseTagSymlink, u"\\??\\C:\\var\\lib\\kubelet\\stage", u"C:\\x", 0));
  ASSERT_TRUE(point.has_value());
  EXPECT_EQ(point->kind, ReparsePoint::Kind::kSymlink);
  EXPECT_FALSE(point->relative);
  EXPECT_EQ(point->target, u"C:\\var\\lib\\kubelet\\stage");
  EXPECT_TRUE(point->names_another_object());
}

TEST(ReparseData, ARelativeSymlinkKeepsItsText) {
  auto point = ParseReparsePoint(Buffer(kReparseTagSymlink, u"..\\stage", u"..\\stage", 1));
  ASSERT_TRUE(point.has_value());
  EXPECT_TRUE(point->relative);
  EXPECT_EQ(point->target, u"..\\stage");
}

TEST(ReparseData, AJunctionToAPathIsAJunction) {
  auto point = ParseReparsePoint(Buffer(kReparseTagMountPoint, u"\\??\\D:\\data", u"D:\\data", std::nullopt));
  ASSERT_TRUE(point.has_value());
  EXPECT_EQ(point->kind, ReparsePoint::Kind::kJunction);
  EXPECT_EQ(point->target, u"D:\\data");
}

TEST(ReparseData, AJunctionToAVolumesRootIsAVolumeMountPoint) {
  const std::u16string volume = u"\\??\\Volume{3f1c2a9e-0b7d-4c55-9e21-6a8f0d4b7c10}\\";
  auto point = ParseReparsePoint(Buffer(kReparseTagMountPoint, volume, u"", std::nullopt));
  ASSERT_TRUE(point.has_value());
  EXPECT_EQ(point->kind, ReparsePoint::Kind::kVolumeMountPoint);
  EXPECT_EQ(point->target, u"\\\\?\\Volume{3f1c2a9e-0b7d-4c55-9e21-6a8f0d4b7c10}\\");
  // A directory inside a volume, or something that only looks like a volume name, is a junction like any other.
  for (std::u16string other :
       {volume + u"dir", std::u16string(u"\\??\\Volume{not-a-guid-at-all-xxxxxxxxxxxxxxxxxx}\\")}) {
    auto junction = ParseReparsePoint(Buffer(kReparseTagMountPoint, other, u"", std::nullopt));
    ASSERT_TRUE(junction.has_value());
    EXPECT_EQ(junction->kind, ReparsePoint::Kind::kJunction);
  }
}

TEST(ReparseData, OtherTagsAreOtherWithTheirSurrogateBit) {
  std::vector<uint8_t> dedup;
  Put32(dedup, 0x80000013);  // IO_REPARSE_TAG_DEDUP: data elsewhere, the name is the file's own
  Put32(dedup, 0);
  auto point = ParseReparsePoint(dedup);
  ASSERT_TRUE(point.has_value());
  EXPECT_EQ(point->kind, ReparsePoint::Kind::kOther);
  EXPECT_FALSE(point->names_another_object());
  std::vector<uint8_t> wci;
  Put32(wci, 0xA0001027);  // IO_REPARSE_TAG_WCI_LINK_1: a container layer link, a name surrogate
  Put32(wci, 0);
  EXPECT_TRUE(ParseReparsePoint(wci)->names_another_object());
}

TEST(ReparseData, MalformedDataIsRefused) {
  EXPECT_FALSE(ParseReparsePoint(std::vector<uint8_t>{0x0c, 0x00, 0x00}).has_value());
  std::vector<uint8_t> good = Buffer(kReparseTagSymlink, u"\\??\\C:\\x", u"C:\\x", 0);
  for (size_t cut = 8; cut < good.size(); ++cut) {
    EXPECT_FALSE(ParseReparsePoint(std::vector<uint8_t>(good.begin(), good.begin() + cut)).has_value()) << cut;
  }
  std::vector<uint8_t> odd = good;
  odd[8] = 1;  // a name offset in the middle of a UTF-16 unit
  EXPECT_FALSE(ParseReparsePoint(odd).has_value());
}

TEST(ReparseData, TheSymlinkCreateSymlinkWritesReadsBackAsItsTarget) {
  std::vector<uint8_t> data = AbsoluteSymlinkData(u"C:\\var\\lib\\kubelet\\plugins\\x\\stage");
  // As CreateSymbolicLink writes it: the NT prefix on the substitute name, the plain path as the print name.
  EXPECT_EQ(data.size(), 20u + 2 * (4 + 34) + 2 * 34);
  auto point = ParseReparsePoint(data);
  ASSERT_TRUE(point.has_value());
  EXPECT_EQ(point->kind, ReparsePoint::Kind::kSymlink);
  EXPECT_FALSE(point->relative);
  EXPECT_EQ(point->target, u"C:\\var\\lib\\kubelet\\plugins\\x\\stage");
  EXPECT_EQ(data[4] | (data[5] << 8), static_cast<int>(data.size() - 8));  // ReparseDataLength
}

TEST(ReparseData, ASymlinkToAUncPathIsWrittenAndReadAsWindowsWritesIt) {
  // What `mklink /D link \\server\share\pvc\` writes, and the SMB group's local_path links are.
  std::vector<uint8_t> data = AbsoluteSymlinkData(u"\\\\srv\\share\\pvc\\");
  auto written = ParseReparsePoint(data);
  ASSERT_TRUE(written.has_value());
  EXPECT_EQ(written->target, u"\\\\srv\\share\\pvc\\");
  EXPECT_EQ(data.size(), 20u + 2 * (8 + 14) + 2 * 16);  // substitute "\??\UNC\srv\share\pvc\", print as given
  auto read = ParseReparsePoint(Buffer(kReparseTagSymlink, u"\\??\\unc\\srv\\share", u"\\\\srv\\share", 0));
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->target, u"\\\\srv\\share");
}

}  // namespace
}  // namespace csi_proxy::common

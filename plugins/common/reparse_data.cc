// Reparse point data as bytes; see reparse_data.h. The layout (little-endian, as on every Windows machine):
// ULONG tag, USHORT data length, USHORT reserved, then for symlinks and mount points four USHORTs (substitute name
// offset and length, print name offset and length, in bytes into the path buffer), for symlinks a ULONG of flags,
// then the path buffer of UTF-16 names.
#include "reparse_data.h"

namespace csi_proxy::common {
namespace {

constexpr size_t kHeaderSize = 8;
constexpr size_t kSymlinkPathBuffer = kHeaderSize + 12;
constexpr size_t kMountPointPathBuffer = kHeaderSize + 8;
constexpr uint32_t kSymlinkFlagRelative = 1;  // SYMLINK_FLAG_RELATIVE
constexpr std::u16string_view kNtPrefix = u"\\??\\";
// A UNC path ("\\server\share\x") in NT form: "\??\UNC\server\share\x".
constexpr std::u16string_view kUncPrefix = u"\\\\";
constexpr std::u16string_view kNtUncPrefix = u"\\??\\UNC\\";

uint32_t Read16(std::span<const uint8_t> d, size_t at) { return d[at] | (d[at + 1] << 8); }
uint32_t Read32(std::span<const uint8_t> d, size_t at) { return Read16(d, at) | (Read16(d, at + 2) << 16); }

void Write16(std::vector<uint8_t>& d, size_t at, size_t v) {
  d[at] = static_cast<uint8_t>(v);
  d[at + 1] = static_cast<uint8_t>(v >> 8);
}

char16_t AsciiLower(char16_t c) { return c >= u'A' && c <= u'Z' ? static_cast<char16_t>(c + 32) : c; }

bool StartsWithIgnoringCase(std::u16string_view text, std::u16string_view prefix) {
  if (text.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (AsciiLower(text[i]) != AsciiLower(prefix[i])) return false;
  }
  return true;
}

bool IsHexDigit(char16_t c) { return (c >= u'0' && c <= u'9') || (AsciiLower(c) >= u'a' && AsciiLower(c) <= u'f'); }

// "\??\Volume{xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx}\": a volume's root.
bool IsVolumeRootName(std::u16string_view target) {
  constexpr std::u16string_view kVolume = u"\\??\\Volume{";
  if (target.size() != kVolume.size() + 36 + 2 || !StartsWithIgnoringCase(target, kVolume)) return false;
  std::u16string_view guid = target.substr(kVolume.size(), 36);
  for (size_t i = 0; i < guid.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? guid[i] != u'-' : !IsHexDigit(guid[i])) return false;
  }
  return target.substr(target.size() - 2) == u"}\\";
}

}  // namespace

std::optional<ReparsePoint> ParseReparsePoint(std::span<const uint8_t> data) {
  if (data.size() < kHeaderSize) return std::nullopt;
  ReparsePoint point;
  point.tag = Read32(data, 0);
  size_t names;
  if (point.tag == kReparseTagSymlink) {
    names = kSymlinkPathBuffer;
  } else if (point.tag == kReparseTagMountPoint) {
    names = kMountPointPathBuffer;
  } else {
    return point;  // kOther
  }
  if (data.size() < names) return std::nullopt;
  const size_t offset = Read16(data, kHeaderSize), length = Read16(data, kHeaderSize + 2);
  if (offset % 2 != 0 || length % 2 != 0 || names + offset + length > data.size()) return std::nullopt;
  std::u16string target(length / 2, u'\0');
  for (size_t i = 0; i < target.size(); ++i) target[i] = static_cast<char16_t>(Read16(data, names + offset + 2 * i));

  if (point.tag == kReparseTagSymlink) {
    point.kind = ReparsePoint::Kind::kSymlink;
    point.relative = (Read32(data, kHeaderSize + 8) & kSymlinkFlagRelative) != 0;
  } else if (IsVolumeRootName(target)) {
    point.kind = ReparsePoint::Kind::kVolumeMountPoint;
    target.replace(0, kNtPrefix.size(), u"\\\\?\\");
    point.target = std::move(target);
    return point;
  } else {
    point.kind = ReparsePoint::Kind::kJunction;
  }
  if (!point.relative && StartsWithIgnoringCase(target, kNtUncPrefix)) {
    target.replace(0, kNtUncPrefix.size(), kUncPrefix);
  } else if (!point.relative && StartsWithIgnoringCase(target, kNtPrefix)) {
    target.erase(0, kNtPrefix.size());
  }
  point.target = std::move(target);
  return point;
}

std::vector<uint8_t> AbsoluteSymlinkData(std::u16string_view target) {
  const std::u16string substitute = target.substr(0, kUncPrefix.size()) == kUncPrefix
                                        ? std::u16string(kNtUncPrefix) + std::u16string(target.substr(2))
                                        : std::u16string(kNtPrefix) + std::u16string(target);
  const size_t substitute_bytes = substitute.size() * 2, print_bytes = target.size() * 2;
  std::vector<uint8_t> data(kSymlinkPathBuffer + substitute_bytes + print_bytes, 0);
  Write16(data, 0, kReparseTagSymlink & 0xFFFF);
  Write16(data, 2, kReparseTagSymlink >> 16);
  Write16(data, 4, data.size() - kHeaderSize);  // the data length: everything after the header
  Write16(data, 8, 0);                          // substitute name offset
  Write16(data, 10, substitute_bytes);
  Write16(data, 12, substitute_bytes);  // print name offset
  Write16(data, 14, print_bytes);
  // Flags (offset 16) stay 0: an absolute target.
  size_t at = kSymlinkPathBuffer;
  for (char16_t c : substitute) Write16(data, (at += 2) - 2, c);
  for (char16_t c : target) Write16(data, (at += 2) - 2, c);
  return data;
}

}  // namespace csi_proxy::common

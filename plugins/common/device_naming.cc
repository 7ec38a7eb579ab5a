// Disk names parsed from kernel and device text; see device_naming.h.
#include "device_naming.h"

#include <algorithm>
#include <climits>

#include "text.h"

namespace csi_proxy::common {

std::optional<ScsiAddress> ParseScsiAddress(std::string_view text) {
  uint64_t parts[4];
  for (int i = 0; i < 4; ++i) {
    auto colon = text.find(':');
    std::string_view field = i < 3 ? text.substr(0, colon) : text;
    if ((i < 3 && colon == std::string_view::npos) || !ParseDecimal(field, parts[i])) return std::nullopt;
    if (i < 3) text.remove_prefix(colon + 1);
  }
  if (parts[0] > UINT32_MAX || parts[1] > UINT32_MAX || parts[2] > UINT32_MAX) return std::nullopt;
  return ScsiAddress{static_cast<uint32_t>(parts[0]), static_cast<uint32_t>(parts[1]), static_cast<uint32_t>(parts[2]),
                     parts[3]};
}

std::string SelectPage83Identifier(std::string_view page) {
  if (page.size() < 4) return {};
  auto byte = [&](size_t i) { return static_cast<uint8_t>(page[i]); };
  size_t end = std::min(page.size(), size_t{4} + ((size_t{byte(2)} << 8) | byte(3)));
  size_t off = 4;
  while (off + 4 <= end) {
    uint8_t code_set = byte(off) & 0x0f;
    uint8_t association = (byte(off + 1) >> 4) & 0x03;
    size_t length = byte(off + 3);
    if (off + 4 + length > end) break;
    if (auto text = Page83Text(code_set, association, page.substr(off + 4, length))) return *text;
    off += 4 + length;
  }
  return {};
}

std::optional<std::string> Page83Text(uint32_t code_set, uint32_t association, std::string_view designator) {
  if (association != 0) return std::nullopt;
  if (code_set == 1) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string hex;
    for (unsigned char c : designator) {
      hex.push_back(kHex[c >> 4]);
      hex.push_back(kHex[c & 0x0f]);
    }
    return hex;
  }
  if (code_set == 2) return std::string(designator);
  return std::nullopt;
}

std::string ParseVpdSerial(std::string_view page) {
  if (page.size() < 4) return {};
  size_t length = (size_t{static_cast<uint8_t>(page[2])} << 8) | static_cast<uint8_t>(page[3]);
  return std::string(page.substr(4, std::min(length, page.size() - 4)));
}

namespace {

// The hex digits of `text` in order, lowercased, when it holds only hex digits and the separators sysfs puts
// between them (blanks, dashes); "" for anything else or all zeros.
std::string NonZeroHexDigits(std::string_view text) {
  std::string hex;
  bool non_zero = false;
  for (char c : text) {
    if (c == ' ' || c == '-' || c == '\n') continue;
    if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return {};
    non_zero = non_zero || c != '0';
    hex.push_back(c);
  }
  return non_zero ? hex : std::string();
}

}  // namespace

std::string NvmePage83Identifier(std::string_view eui, std::string_view nguid) {
  if (std::string hex = NonZeroHexDigits(eui); hex.size() == 16) return "eui." + hex;
  if (std::string hex = NonZeroHexDigits(nguid); hex.size() == 32) return "eui." + hex;
  return {};
}

StatusOr<uint32_t> ParseDiskNumber(std::string_view text) {
  uint64_t value = 0;
  if (text.empty()) return InvalidArgument("disk id is empty");
  if (text.size() > 10 || !ParseDecimal(text, value) || value > UINT32_MAX) {
    return InvalidArgument("disk id " + QuotePath(text) + " is not a disk number (a decimal number, see ListDiskIDs)");
  }
  return static_cast<uint32_t>(value);
}

std::optional<std::string> CanonicalVolumeGuidPath(std::string_view text) {
  constexpr std::string_view kPrefix = "\\\\?\\Volume{";
  if (text.size() >= 2 && text.back() == '\\') text.remove_suffix(1);
  if (text.size() != kPrefix.size() + 37 || text.back() != '}' ||
      AsciiLower(std::string(text.substr(0, kPrefix.size()))) != AsciiLower(std::string(kPrefix))) {
    return std::nullopt;  // the object manager compares "Volume" without regard to case
  }
  std::string canonical(kPrefix);
  const std::string_view guid = text.substr(kPrefix.size(), 36);
  for (size_t i = 0; i < guid.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    char c = guid[i];
    if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
    if (dash ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return std::nullopt;
    canonical.push_back(c);
  }
  return canonical + "}\\";
}

}  // namespace csi_proxy::common

// Input rules for the iSCSI group; see iscsi_validation.h.
#include "iscsi_validation.h"

#include <cctype>

#include "ip_literal.h"

namespace csi_proxy::iscsi {
namespace {

using common::IsAsciiAlnum;

bool IsHex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

bool AllHex(std::string_view s) {
  for (char c : s) {
    if (!IsHex(c)) return false;
  }
  return true;
}

}  // namespace

StatusOr<Portal> ValidatePortal(const std::string& address, uint32_t port) {
  if (address.empty()) return InvalidArgument("target_portal.target_address is empty");
  if (port > 65535) return InvalidArgument("target_portal.target_port " + std::to_string(port) + " is above 65535");
  Portal portal;
  portal.port = port == 0 ? kDefaultIscsiPort : static_cast<uint16_t>(port);

  std::string bare = address;
  bool bracketed = false;
  if (bare.size() >= 2 && bare.front() == '[' && bare.back() == ']') {
    bare = bare.substr(1, bare.size() - 2);
    bracketed = true;
  }
  if (!bracketed && common::IsIpv4Literal(bare)) {
    portal.address = bare;
    return portal;
  }
  if (bare.find(':') != std::string::npos && bare.size() <= 45 && common::IsIpv6Literal(bare)) {
    portal.address = common::AsciiLower(bare);
    return portal;
  }
  if (!bracketed && common::IsHostName(bare)) {
    // A name made only of digits and dots that inet_pton refused (e.g. 999.1.1.1) is a bad IPv4 address, not a
    // host name; resolvers would otherwise read it in surprising ways.
    bool numeric = true;
    for (char c : bare) numeric = numeric && (IsDigit(c) || c == '.');
    if (!numeric) {
      portal.address = common::AsciiLower(bare);
      return portal;
    }
  }
  return InvalidArgument("target_portal.target_address " + QuoteValue(address) +
                         " is not an IPv4 address, an IPv6 address or a host name");
}

Status ValidateIqn(const std::string& iqn) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("iqn " + QuoteValue(iqn) + " is not a valid iSCSI name: " + why);
  };
  if (iqn.empty()) return InvalidArgument("iqn is empty");
  if (iqn.size() > kMaxIqnLength) return bad("longer than 223 characters");
  for (char c : iqn) {
    // '_' is outside RFC 3722 but common in real target names (and harmless here).
    if (!IsAsciiAlnum(c) && c != '.' && c != '-' && c != ':' && c != '_') {
      return bad("only letters, digits, '.', '-', '_' and ':' are allowed");
    }
  }
  std::string lower = common::AsciiLower(iqn);
  if (lower.rfind("iqn.", 0) == 0) {
    // iqn.YYYY-MM.<naming authority>[:<unique name>]
    if (lower.size() < 12 || !IsDigit(lower[4]) || !IsDigit(lower[5]) || !IsDigit(lower[6]) || !IsDigit(lower[7]) ||
        lower[8] != '-' || !IsDigit(lower[9]) || !IsDigit(lower[10]) || lower[11] != '.') {
      return bad("expected iqn.YYYY-MM.<reversed domain name>[:<name>]");
    }
    std::string authority =
        lower.substr(12, lower.find(':') == std::string::npos ? std::string::npos : lower.find(':') - 12);
    if (authority.empty() || authority.find(':') != std::string::npos || authority.front() == '.' ||
        authority.back() == '.' || authority.find("..") != std::string::npos) {
      return bad("the naming authority after the date must be a reversed domain name");
    }
    return Status::Ok();
  }
  if (lower.rfind("eui.", 0) == 0) {
    if (lower.size() == 20 && AllHex(std::string_view(lower).substr(4))) return Status::Ok();
    return bad("expected eui. and 16 hexadecimal digits");
  }
  if (lower.rfind("naa.", 0) == 0) {
    if ((lower.size() == 20 || lower.size() == 36) && AllHex(std::string_view(lower).substr(4))) return Status::Ok();
    return bad("expected naa. and 16 or 32 hexadecimal digits");
  }
  return bad("it must start with iqn., eui. or naa.");
}

Status ValidateChapName(const std::string& name, std::string_view field) {
  if (name.empty()) return InvalidArgument(std::string(field) + " is empty");
  if (name.size() > kMaxChapFieldLength) return InvalidArgument(std::string(field) + " is longer than 255 characters");
  for (char c : name) {
    if (!IsAsciiAlnum(c) && c != '.' && c != '_' && c != '-' && c != ':' && c != '@') {
      return InvalidArgument(std::string(field) + " " + QuoteValue(name) +
                             " may only contain letters, digits and . _ - : @");
    }
  }
  return Status::Ok();
}

Status ValidateChapSecret(const std::string& secret, std::string_view field) {
  if (secret.empty()) return InvalidArgument(std::string(field) + " is empty");
  if (secret.size() > kMaxChapFieldLength) {
    return InvalidArgument(std::string(field) + " is longer than 255 characters");
  }
  for (char c : secret) {
    auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f) {
      return InvalidArgument(std::string(field) +
                             " may only contain printable ASCII characters without spaces (value not shown)");
    }
  }
  return Status::Ok();
}

StatusOr<AuthType> ValidateAuthType(int32_t value) {
  switch (value) {
    case 0:
      return AuthType::kNone;
    case 1:
      return AuthType::kOneWayChap;
    case 2:
      return AuthType::kMutualChap;
    default:
      return InvalidArgument("auth_type " + std::to_string(value) +
                             " is not NONE (0), ONE_WAY_CHAP (1) or MUTUAL_CHAP (2)");
  }
}

std::string PortalToString(const Portal& portal) {
  bool v6 = portal.address.find(':') != std::string::npos;
  return (v6 ? "[" + portal.address + "]" : portal.address) + ":" + std::to_string(portal.port);
}

}  // namespace csi_proxy::iscsi

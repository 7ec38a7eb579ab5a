// Input rules for the iSCSI group. Everything a request carries is checked here before any file is touched,
// any socket is opened or any program runs. Error messages never contain a secret.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "csi_proxy/status.hpp"
#include "iscsi_types.h"
#include "text.h"

namespace csi_proxy::iscsi {

// Longest iSCSI name (RFC 7143 section 4.2.7.1) and longest CHAP name/secret open-iscsi stores.
inline constexpr size_t kMaxIqnLength = 223;
inline constexpr size_t kMaxChapFieldLength = 255;

// Checks a portal address and port and returns the normalized portal: port 0 becomes 3260, ports above 65535
// are refused, DNS names are lowercased, IPv6 brackets are stripped. The address must be an IPv4 literal, an
// IPv6 literal (optionally in brackets) or an RFC 1123 host name.
StatusOr<Portal> ValidatePortal(const std::string& address, uint32_t port);

// Checks an iSCSI name: `iqn.YYYY-MM.<reversed domain>[:<anything>]`, `eui.<16 hex>` or `naa.<16|32 hex>`,
// built only from letters, digits, '.', '-' and ':' (the characters RFC 3722 leaves after normalization) and
// '_' (outside the RFC, but found in real target names).
Status ValidateIqn(const std::string& iqn);

// A CHAP name: 1..255 characters from letters, digits and . _ - : @ (an IQN is a valid CHAP name).
Status ValidateChapName(const std::string& name, std::string_view field);

// A CHAP secret: 1..255 printable ASCII characters without spaces. open-iscsi keeps secrets in a line-based
// text record, so control characters and blanks cannot be stored faithfully. The value is never echoed.
Status ValidateChapSecret(const std::string& secret, std::string_view field);

// The wire enum value for the authentication type.
StatusOr<AuthType> ValidateAuthType(int32_t value);

// "address:port", with brackets around an IPv6 address: the form iscsiadm and log lines use.
std::string PortalToString(const Portal& portal);

// A value fit for an error message or a log line (text.h).
using common::QuoteValue;

}  // namespace csi_proxy::iscsi

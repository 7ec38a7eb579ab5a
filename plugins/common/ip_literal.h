// Whether text is an IP address literal, as inet_pton(3) reads one: the request checks of the SMB and iSCSI
// groups on both systems (ip_literal_linux.cc, ip_literal_windows.cc: each system's own inet_pton).
#pragma once

#include <string>

namespace csi_proxy::common {

// A dotted-quad IPv4 address ("192.0.2.1"; no leading zeros, no shorter forms).
bool IsIpv4Literal(const std::string& text);
// An IPv6 address without brackets, port or zone ("fd00::1", "::ffff:192.0.2.1").
bool IsIpv6Literal(const std::string& text);

}  // namespace csi_proxy::common

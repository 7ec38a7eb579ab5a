// Input rules for the SMB group. Everything a request carries is checked here before anything is created or run.
// The rules are stricter than Windows' naming rules on purpose: the server, share, user and domain names end up
// in a mount helper's argv and in its comma-separated option string, so nothing that could end an option
// (',' '='), start a new argument, or mean something to a shell may pass. The password never meets an option
// string or a shell (it travels in the helper's environment), so it may hold any printable character.
#pragma once

#include <string>
#include <string_view>

#include "csi_proxy/status.hpp"
#include "smb_types.h"
#include "text.h"

namespace csi_proxy::smb {

inline constexpr size_t kMaxRemotePathLength = 1024;  // mount.cifs' limit for a UNC name
inline constexpr size_t kMaxShareLength = 80;         // Windows' share name limit
inline constexpr size_t kMaxUsernameLength = 256;     // mount.cifs silently truncates longer names
inline constexpr size_t kMaxDomainLength = 64;        // mount.cifs' domain limit
inline constexpr size_t kMaxPasswordLength = 256;     // mount.cifs doubles commas; 512 is its hard limit

// Parses `\\server\share[\sub\path]` with '\' or '/' as separators (mixed too, as upstream). Server: an RFC 1123
// host name (plus '_', as NetBIOS-style names have it) or an IPv4 address. Share: 1..80 of letters, digits,
// '.', '_', '-', with an optional trailing '$' (hidden shares). Sub-path components: letters, digits, '.', '_',
// '-', at most 255 bytes, never "." or "..".
StatusOr<RemotePath> ParseRemotePath(const std::string& remote_path);

// Splits "user", "DOMAIN\user", "DOMAIN/user" or "user@realm" and checks each part. User names: letters,
// digits and . _ - @, with an optional trailing '$' (machine accounts). Domains: letters, digits and . _ -.
// The password: at most 256 bytes, no control characters (printable ASCII, space and UTF-8 bytes pass).
// A password without a username is refused: it would be silently dropped.
StatusOr<SmbCredentials> ParseCredentials(const std::string& username, const std::string& password);

// A value fit for an error message or a log line (text.h).
using common::QuoteValue;

}  // namespace csi_proxy::smb

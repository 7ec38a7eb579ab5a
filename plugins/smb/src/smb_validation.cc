// Input rules for the SMB group; see smb_validation.h.
#include "smb_validation.h"

#include "ip_literal.h"

namespace csi_proxy::smb {
namespace {

bool IsNameChar(char c) { return common::IsAsciiAlnum(c) || c == '.' || c == '_' || c == '-'; }

}  // namespace

StatusOr<RemotePath> ParseRemotePath(const std::string& remote_path) {
  if (remote_path.empty()) return InvalidArgument("remote_path is empty");
  auto bad = [&](const std::string& why) {
    return InvalidArgument("remote_path " + QuoteValue(remote_path) + " is invalid: " + why);
  };
  if (remote_path.size() > kMaxRemotePathLength) return bad("longer than 1024 characters");

  // Both slash styles, as upstream: split at '\' and '/', drop empty parts.
  std::vector<std::string> parts;
  std::string current;
  for (char c : remote_path) {
    if (c == '\\' || c == '/') {
      if (!current.empty()) parts.push_back(std::move(current));
      current.clear();
    } else {
      current.push_back(c);
    }
  }
  if (!current.empty()) parts.push_back(std::move(current));
  if (parts.size() < 2) return bad("expected \\\\server\\share");

  RemotePath path;
  const std::string& server = parts[0];
  bool numeric = server.find_first_not_of("0123456789.") == std::string::npos;
  if (numeric ? !common::IsIpv4Literal(server) : !common::IsHostName(server, /*allow_underscore=*/true)) {
    return bad("the server must be a host name or an IPv4 address");
  }
  path.server = common::AsciiLower(server);

  std::string share = parts[1];
  if (share.size() > kMaxShareLength) return bad("the share name is longer than 80 characters");
  std::string_view body = share;
  if (body.ends_with('$')) body.remove_suffix(1);  // hidden share ("data$")
  if (body.empty() || body == "." || body == "..") return bad("the share name is empty or a dot name");
  for (char c : body) {
    if (!IsNameChar(c)) return bad("the share name may only contain letters, digits, '.', '_', '-' and a final '$'");
  }
  path.share = common::AsciiLower(share);

  for (size_t i = 2; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    if (part == "." || part == "..") return bad("'.' and '..' are not allowed in the path below the share");
    if (part.size() > 255) return bad("a path component is longer than 255 characters");
    for (char c : part) {
      if (!IsNameChar(c)) return bad("path components may only contain letters, digits, '.', '_' and '-'");
    }
    path.subpath.push_back(part);
  }
  return path;
}

StatusOr<SmbCredentials> ParseCredentials(const std::string& username, const std::string& password) {
  SmbCredentials creds;
  if (password.size() > kMaxPasswordLength) return InvalidArgument("password is longer than 256 bytes");
  for (char c : password) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      return InvalidArgument("password contains a control character (value not shown)");
    }
  }
  if (username.empty()) {
    if (!password.empty()) {
      return InvalidArgument("a password was given without a username; a guest mapping takes neither");
    }
    return creds;
  }
  std::string user = username;
  size_t sep = username.find_first_of("\\/");
  if (sep != std::string::npos) {
    creds.domain = username.substr(0, sep);
    user = username.substr(sep + 1);
    if (creds.domain.empty() || creds.domain.size() > kMaxDomainLength) {
      return InvalidArgument("username " + QuoteValue(username) + ": the domain must have 1 to 64 characters");
    }
    for (char c : creds.domain) {
      if (!IsNameChar(c)) {
        return InvalidArgument("username " + QuoteValue(username) +
                               ": the domain may only contain letters, digits, '.', '_' and '-'");
      }
    }
  }
  if (user.empty() || user.size() > kMaxUsernameLength) {
    return InvalidArgument("username " + QuoteValue(username) + ": the user name must have 1 to 256 characters");
  }
  std::string_view body = user;
  if (body.ends_with('$')) body.remove_suffix(1);  // machine accounts
  if (body.empty()) return InvalidArgument("username " + QuoteValue(username) + " is only '$'");
  for (char c : body) {
    if (!IsNameChar(c) && c != '@') {
      return InvalidArgument("username " + QuoteValue(username) +
                             " may only contain letters, digits, '.', '_', '-', '@' and a final '$' "
                             "(with an optional DOMAIN\\ prefix)");
    }
  }
  creds.username = user;
  creds.password = password;
  return creds;
}

}  // namespace csi_proxy::smb

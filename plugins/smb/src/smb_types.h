// Plain value types shared by the SMB service layer and its OS backends (no protobuf, no OS calls).
#pragma once

#include <string>
#include <vector>

#include "csi_proxy/log.hpp"

namespace csi_proxy::smb {

// A validated remote path `\\server\share[\sub\path]`, split and normalized.
struct RemotePath {
  std::string server;                // lowercase host name or IPv4 address
  std::string share;                 // lowercase share name
  std::vector<std::string> subpath;  // components below the share, case kept

  // The global mapping is per share: "//server/share", lowercase (upstream lowercases it too).
  std::string MappingKey() const { return "//" + server + "/" + share; }
};

// Who the mapping authenticates as. `password` is never logged, never in an argv, never in a message.
struct SmbCredentials {
  std::string username;  // empty: a guest mapping (upstream sends no credential then)
  std::string domain;    // from "DOMAIN\user"; empty otherwise
  std::string password;
};

// Where the group writes its log lines (the host's logger in production). Never receives a secret.
using sdk::LogLevel;
using sdk::LogSink;

}  // namespace csi_proxy::smb

// Plain value types shared by the iSCSI service layer and its OS backends (no protobuf, no OS calls).
#pragma once

#include <cstdint>
#include <string>

#include "csi_proxy/log.hpp"

namespace csi_proxy::iscsi {

// The well-known iSCSI port; upstream turns a requested port of 0 into it.
inline constexpr uint16_t kDefaultIscsiPort = 3260;

// A validated target portal. `address` is an IPv4 literal, an IPv6 literal without brackets, or a lowercase
// DNS name; `port` is never 0.
struct Portal {
  std::string address;
  uint16_t port = kDefaultIscsiPort;

  bool operator==(const Portal&) const = default;
};

// How ConnectTarget authenticates; the numeric values are the wire enum's.
enum class AuthType : int32_t { kNone = 0, kOneWayChap = 1, kMutualChap = 2 };

// Credentials for one login. `secret` is never logged and never put in an argv.
struct ChapLogin {
  AuthType type = AuthType::kNone;
  std::string username;  // CHAP_N the initiator sends
  std::string secret;    // the secret the target checks
};

// Where the group writes its log lines (the host's logger in production). Never receives a secret.
using sdk::LogLevel;
using sdk::LogSink;

}  // namespace csi_proxy::iscsi

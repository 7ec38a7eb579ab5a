// A private pair of connected TCP sockets on 127.0.0.1, the Windows stand-in for socketpair(): gRPC 1.51 serves
// and dials only sockets on Windows, so each named-pipe connection gets one pair, gRPC takes one end and the
// relay (pipe_relay_windows.h) pumps bytes between the pipe and the other.
//
// No port stays open: the listening socket that joins the two ends is bound to an ephemeral port with
// SO_EXCLUSIVEADDRUSE, accepts one connection and is closed at once. A local process that connects to that
// port in the instant it exists gets nothing: the accepted socket is used only when its peer is the socket this
// process connected (the same address and port on both sides), otherwise the pair is made again.
#pragma once

#include "config/win32_windows.h"
#include "csi_proxy/status.hpp"

namespace csi_proxy::host {

struct LoopbackPair {
  UniqueSocket accepted;   // the listening side's end (for a server: the end the gRPC server takes)
  UniqueSocket connected;  // the connecting side's end
};

// Both sockets are overlapped (WSA_FLAG_OVERLAPPED, as gRPC's I/O completion ports need), not inheritable, with
// Nagle's algorithm off.
StatusOr<LoopbackPair> MakeLoopbackPair();

}  // namespace csi_proxy::host

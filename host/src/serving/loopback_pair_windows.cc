// See loopback_pair_windows.h.
#include "loopback_pair_windows.h"

#include <ws2tcpip.h>

#include <cstring>

namespace csi_proxy::host {
namespace {

constexpr int kAttempts = 5;
constexpr int kAcceptWaitMs = 2000;
constexpr int kBacklog = 8;

UniqueSocket NewSocket() {
  return UniqueSocket(
      WSASocketW(AF_INET, SOCK_STREAM, IPPROTO_TCP, nullptr, 0, WSA_FLAG_OVERLAPPED | WSA_FLAG_NO_HANDLE_INHERIT));
}

Status SocketError(const char* what) { return Internal(std::string(what) + ": " + ErrorText(WSAGetLastError())); }

bool SameAddress(const sockaddr_in& a, const sockaddr_in& b) {
  return a.sin_family == b.sin_family && a.sin_port == b.sin_port && a.sin_addr.s_addr == b.sin_addr.s_addr;
}

bool AddressOf(SOCKET s, bool peer, sockaddr_in& out) {
  int len = sizeof out;
  std::memset(&out, 0, sizeof out);
  auto* addr = reinterpret_cast<sockaddr*>(&out);
  return (peer ? getpeername(s, addr, &len) : getsockname(s, addr, &len)) == 0 && len == sizeof out;
}

// One attempt. Returns an empty pair (and OK) when a stranger's connection came first, so the caller tries again.
StatusOr<LoopbackPair> TryOnce() {
  UniqueSocket listener = NewSocket();
  if (!listener.valid()) return SocketError("socket");
  BOOL exclusive = TRUE;
  if (setsockopt(listener.get(), SOL_SOCKET, SO_EXCLUSIVEADDRUSE, reinterpret_cast<const char*>(&exclusive),
                 sizeof exclusive) != 0) {
    return SocketError("SO_EXCLUSIVEADDRUSE");
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (bind(listener.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) return SocketError("bind");
  if (listen(listener.get(), kBacklog) != 0) return SocketError("listen");
  sockaddr_in listening{};
  if (!AddressOf(listener.get(), false, listening)) return SocketError("getsockname");

  UniqueSocket connected = NewSocket();
  if (!connected.valid()) return SocketError("socket");
  if (connect(connected.get(), reinterpret_cast<const sockaddr*>(&listening), sizeof listening) != 0) {
    return LoopbackPair{};  // strangers filled the backlog: try again
  }
  sockaddr_in connected_local{}, connected_peer{};
  if (!AddressOf(connected.get(), false, connected_local) || !AddressOf(connected.get(), true, connected_peer)) {
    return SocketError("getsockname");
  }

  // Our connection is in the backlog: accept until it comes out, dropping any other.
  for (int i = 0; i <= kBacklog; ++i) {
    fd_set readable;
    FD_ZERO(&readable);
    FD_SET(listener.get(), &readable);
    timeval wait{kAcceptWaitMs / 1000, (kAcceptWaitMs % 1000) * 1000};
    if (select(0, &readable, nullptr, nullptr, &wait) != 1)
      return Internal("the private loopback connection never arrived");
    sockaddr_in peer{};
    int len = sizeof peer;
    UniqueSocket accepted(accept(listener.get(), reinterpret_cast<sockaddr*>(&peer), &len));
    if (!accepted.valid()) return SocketError("accept");
    sockaddr_in accepted_local{};
    if (!AddressOf(accepted.get(), false, accepted_local)) return SocketError("getsockname");
    if (!SameAddress(peer, connected_local) || !SameAddress(accepted_local, connected_peer)) continue;  // a stranger
    listener.reset();
    // The accepted socket inherits the listener's flags; make sure it is not inheritable either.
    SetHandleInformation(reinterpret_cast<HANDLE>(accepted.get()), HANDLE_FLAG_INHERIT, 0);
    BOOL nodelay = TRUE;
    setsockopt(accepted.get(), IPPROTO_TCP, TCP_NODELAY, reinterpret_cast<const char*>(&nodelay), sizeof nodelay);
    setsockopt(connected.get(), IPPROTO_TCP, TCP_NODELAY, reinterpret_cast<const char*>(&nodelay), sizeof nodelay);
    return LoopbackPair{std::move(accepted), std::move(connected)};
  }
  return LoopbackPair{};
}

}  // namespace

StatusOr<LoopbackPair> MakeLoopbackPair() {
  if (!EnsureWinsock()) return Internal("WSAStartup failed");
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    CSI_PROXY_ASSIGN_OR_RETURN(LoopbackPair pair, TryOnce());
    if (pair.accepted.valid()) return pair;
  }
  return Unavailable("other local processes kept connecting to the private loopback port; no socket pair made");
}

}  // namespace csi_proxy::host

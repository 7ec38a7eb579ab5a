// IP address literals through Winsock's inet_pton; see ip_literal.h.
#include <winsock2.h>
#include <ws2tcpip.h>

#include <mutex>

#include "ip_literal.h"

namespace csi_proxy::common {
namespace {

// Winsock is started once for the process (and never stopped: the DLL's last user is the process's end), so the
// conversion works whatever the caller did before.
void StartWinsock() {
  static std::once_flag once;
  std::call_once(once, [] {
    WSADATA data;
    ::WSAStartup(MAKEWORD(2, 2), &data);
  });
}

}  // namespace

bool IsIpv4Literal(const std::string& text) {
  StartWinsock();
  IN_ADDR v4;
  return ::inet_pton(AF_INET, text.c_str(), &v4) == 1;
}

bool IsIpv6Literal(const std::string& text) {
  StartWinsock();
  IN6_ADDR v6;
  return ::inet_pton(AF_INET6, text.c_str(), &v6) == 1;
}

}  // namespace csi_proxy::common

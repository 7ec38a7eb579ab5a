// IP address literals through glibc's inet_pton; see ip_literal.h.
#include <arpa/inet.h>

#include "ip_literal.h"

namespace csi_proxy::common {

bool IsIpv4Literal(const std::string& text) {
  in_addr v4;
  return inet_pton(AF_INET, text.c_str(), &v4) == 1;
}

bool IsIpv6Literal(const std::string& text) {
  in6_addr v6;
  return inet_pton(AF_INET6, text.c_str(), &v6) == 1;
}

}  // namespace csi_proxy::common

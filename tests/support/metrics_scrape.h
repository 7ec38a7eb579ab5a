// The Prometheus exposition as a scraper sees it: GET /metrics over a plain TCP connection, and one series' value.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sys/time.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <map>
#include <sstream>
#include <string>

namespace csi_proxy::testing {

// GET /metrics over a plain TCP connection; the body, or empty when the listener did not answer (within `timeout`
// for each read and write).
inline std::string Scrape(uint16_t port, std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval tv{static_cast<time_t>(timeout.count() / 1000), static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  std::string reply;
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) {
    std::string request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buf[65536];
      for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) reply.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  size_t body = reply.find("\r\n\r\n");
  if (reply.rfind("HTTP/1.1 200", 0) != 0 && reply.rfind("HTTP/1.0 200", 0) != 0) return "";
  return body == std::string::npos ? "" : reply.substr(body + 4);
}

// The value of the series `name` with exactly `labels`; NaN when the exposition has no such series.
inline double Value(const std::string& text, const std::string& name,
                    const std::map<std::string, std::string>& labels) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name + "{", 0) != 0 && !(labels.empty() && line.rfind(name + " ", 0) == 0)) continue;
    size_t close = line.find("} ");
    std::string set = close == std::string::npos ? "" : line.substr(name.size() + 1, close - name.size() - 1);
    size_t found = 0;
    for (const auto& [k, v] : labels) found += set.find(k + "=\"" + v + "\"") != std::string::npos;
    size_t count = 0;
    for (size_t at = set.find("=\""); at != std::string::npos; at = set.find("=\"", at + 1)) ++count;
    if (found == labels.size() && count == labels.size()) {
      return std::stod(line.substr(close == std::string::npos ? name.size() + 1 : close + 2));
    }
  }
  return NAN;
}

}  // namespace csi_proxy::testing

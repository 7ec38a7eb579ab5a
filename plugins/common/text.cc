// Small text helpers; see text.h.
#include "text.h"

#include <cctype>
#include <cstdio>

namespace csi_proxy::common {

bool ParseDecimal(std::string_view text, uint64_t& out) {
  if (text.empty() || text.size() > 20) return false;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    uint64_t next = v * 10 + static_cast<uint64_t>(c - '0');
    if (next / 10 != v) return false;  // overflow
    v = next;
  }
  out = v;
  return true;
}

std::string AsciiLower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool IsHostName(std::string_view name, bool allow_underscore) {
  if (name.empty() || name.size() > 253) return false;
  size_t start = 0;
  for (;;) {
    size_t end = name.find('.', start);
    if (end == std::string_view::npos) end = name.size();
    if (end == start || end - start > 63 || name[start] == '-' || name[end - 1] == '-') return false;
    for (size_t i = start; i < end; ++i) {
      char c = name[i];
      if (!IsAsciiAlnum(c) && c != '-' && !(allow_underscore && c == '_')) return false;
    }
    if (end == name.size()) return true;
    start = end + 1;
  }
}

std::string OutputTail(const std::string& output) {
  std::string t = output.size() > 1000 ? output.substr(output.size() - 1000) : output;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  return t;
}

std::string QuoteValue(std::string_view value) {
  std::string out = "\"";
  const size_t shown = value.size() > kQuotedValueMax ? kQuotedValueMax : value.size();
  for (unsigned char c : value.substr(0, shown)) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (shown < value.size())
    out += "...\" (" + std::to_string(value.size()) + " bytes)";
  else
    out += '"';
  return out;
}

}  // namespace csi_proxy::common

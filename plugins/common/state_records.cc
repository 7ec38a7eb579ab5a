// The part of the state records both systems share: file names and the record text; see state_records.h.
#include "state_records.h"

#include <cstdint>

namespace csi_proxy::common {
namespace {

std::string Escape(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '%') {
      out += "%25";
    } else if (c == '\n') {
      out += "%0A";
    } else if (c == '\r') {
      out += "%0D";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string Unescape(std::string_view value) {
  std::string out;
  for (size_t i = 0; i < value.size(); ++i) {
    std::string_view code = value.substr(i, 3);
    if (code == "%25" || code == "%0A" || code == "%0D") {
      out.push_back(code == "%25" ? '%' : code == "%0A" ? '\n' : '\r');
      i += 2;
    } else {
      out.push_back(value[i]);
    }
  }
  return out;
}

}  // namespace

std::string RecordFileName(std::string_view key) {
  uint64_t hash = 14695981039346656037ull;  // FNV-1a 64: stable across builds and runs, unlike std::hash
  for (unsigned char c : key) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text(16, '0');
  for (int i = 15; i >= 0; --i, hash >>= 4) text[static_cast<size_t>(i)] = kHex[hash & 0xf];
  return text;
}

RecordFields ParseRecord(std::string_view text) {
  RecordFields fields;
  while (!text.empty()) {
    auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    auto eq = line.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    fields[std::string(line.substr(0, eq))] = Unescape(line.substr(eq + 1));
  }
  return fields;
}

std::string FormatRecord(const RecordFields& fields) {
  std::string text = "key=" + Escape(fields.at("key")) + "\n";
  for (const auto& [name, value] : fields) {
    if (name != "key") text += name + "=" + Escape(value) + "\n";
  }
  return text;
}

}  // namespace csi_proxy::common

// Small text helpers for the groups' input checks and messages: ASCII classes, decimal numbers, host names, and
// request paths or program text made fit for an error message or a log line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace csi_proxy::common {

inline bool IsAsciiAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

// Unsigned decimal text, as sysfs and requests write numbers: digits only (no sign, no blanks, not empty), within
// uint64. False for anything else, leaving `out` unchanged.
bool ParseDecimal(std::string_view text, uint64_t& out);

// ASCII lowercase; other bytes unchanged.
std::string AsciiLower(std::string s);

// An RFC 1123 host name: dot-separated labels of letters, digits and '-' (and '_' with `allow_underscore`, as
// NetBIOS-style names have it), 1..63 characters each, no label starting or ending with '-', at most 253
// characters in all.
bool IsHostName(std::string_view name, bool allow_underscore = false);

// How many bytes of a request value a message quotes. A message (and the log line that repeats it) stays small
// whatever the caller sends: a 15 MiB path must not become a 15 MiB error and a 15 MiB log line.
inline constexpr size_t kQuotedValueMax = 256;

// The one way every group quotes a request value (a path, a name, a share) in an error message or a log line: in
// double quotes with control bytes, DEL, quotes and backslashes escaped, so request data cannot forge log lines;
// at most kQuotedValueMax bytes of the value, and a longer value is cut with `..." (N bytes)` so the reader knows
// how long it was. The result is at most about 4 * kQuotedValueMax + 32 bytes.
std::string QuoteValue(std::string_view value);

// The same quote for a path (the older name, kept for its many call sites).
inline std::string QuotePath(std::string_view path) { return QuoteValue(path); }

// The last 1000 bytes of a program's output, without trailing newlines and blanks, for a message.
std::string OutputTail(const std::string& output);

}  // namespace csi_proxy::common

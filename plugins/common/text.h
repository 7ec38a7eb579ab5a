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

// A value fit for an error message or a log line: at most 64 characters, non-printable bytes and '\' as \xNN.
std::string Printable(std::string_view value);

// The path in double quotes with control bytes, quotes and backslashes escaped, so request data cannot forge
// log lines or messages.
std::string QuotePath(std::string_view path);

// The last 1000 bytes of a program's output, without trailing newlines and blanks, for a message.
std::string OutputTail(const std::string& output);

}  // namespace csi_proxy::common

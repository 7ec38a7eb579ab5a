// Win32 basics the groups share on Windows: an owned HANDLE, UTF-8 <-> UTF-16 text, and Win32 / NT error codes
// as gRPC statuses (the counterpart of errno_linux.h).
#pragma once

#include <windows.h>
#include <winternl.h>

#include <string>
#include <string_view>
#include <utility>

#include "csi_proxy/status.hpp"

namespace csi_proxy::common {

// Owns one kernel handle; closes it on destruction. Both "no handle" values of Win32 (NULL and
// INVALID_HANDLE_VALUE) count as empty.
class UniqueHandle {
 public:
  UniqueHandle() = default;
  explicit UniqueHandle(HANDLE h) : h_(h) {}
  UniqueHandle(UniqueHandle&& other) noexcept : h_(std::exchange(other.h_, nullptr)) {}
  UniqueHandle& operator=(UniqueHandle&& other) noexcept {
    if (this != &other) Reset(std::exchange(other.h_, nullptr));
    return *this;
  }
  UniqueHandle(const UniqueHandle&) = delete;
  UniqueHandle& operator=(const UniqueHandle&) = delete;
  ~UniqueHandle() { Reset(); }

  HANDLE get() const { return h_; }
  bool valid() const { return h_ != nullptr && h_ != INVALID_HANDLE_VALUE; }
  void Reset(HANDLE h = nullptr) {
    if (valid()) ::CloseHandle(h_);
    h_ = h;
  }

 private:
  HANDLE h_ = nullptr;
};

// UTF-8 (request data, configuration) to UTF-16 (Win32); INVALID_ARGUMENT for text that is not UTF-8.
StatusOr<std::wstring> Utf8ToWide(std::string_view text);
// UTF-16 to UTF-8; unpaired surrogates become U+FFFD.
std::string WideToUtf8(std::wstring_view text);

// Portable UTF-16 (reparse_data.h) as Win32's, whose wchar_t is the same 16 bits.
inline std::wstring ToWide(std::u16string_view text) { return std::wstring(text.begin(), text.end()); }

// "what: <the system's message> (error N)".
std::string Win32Message(std::string_view what, DWORD error);

// "what: <message>" with a gRPC code chosen from the Win32 error: not found NOT_FOUND, exists ALREADY_EXISTS,
// access denied / privilege not held PERMISSION_DENIED, directory not empty / sharing violation / not a
// directory / not supported FAILED_PRECONDITION, bad name / too long INVALID_ARGUMENT, the service database
// locked UNAVAILABLE, anything else INTERNAL.
Status Win32Status(DWORD error, const std::string& what);
// The same for an NTSTATUS (native API calls), through its Win32 error.
Status NtStatusToStatus(NTSTATUS status, const std::string& what);

}  // namespace csi_proxy::common

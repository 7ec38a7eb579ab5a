// Small pieces every Windows part of the host uses: owning wrappers of a HANDLE and a SOCKET, UTF-8 <-> UTF-16,
// the text of a Windows error code and of a SID.
#pragma once

// clang-format off
#include <winsock2.h>
#include <windows.h>
// clang-format on

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "csi_proxy/status.hpp"

namespace csi_proxy::host {

class UniqueHandle {
 public:
  UniqueHandle() = default;
  explicit UniqueHandle(HANDLE h) : h_(h) {}
  ~UniqueHandle() { reset(); }
  UniqueHandle(UniqueHandle&& o) noexcept : h_(o.release()) {}
  UniqueHandle& operator=(UniqueHandle&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  UniqueHandle(const UniqueHandle&) = delete;
  UniqueHandle& operator=(const UniqueHandle&) = delete;

  HANDLE get() const { return h_; }
  bool valid() const { return h_ != nullptr && h_ != INVALID_HANDLE_VALUE; }
  HANDLE release() { return std::exchange(h_, INVALID_HANDLE_VALUE); }
  void reset(HANDLE h = INVALID_HANDLE_VALUE) {
    if (valid()) CloseHandle(h_);
    h_ = h;
  }

 private:
  HANDLE h_ = INVALID_HANDLE_VALUE;
};

class UniqueSocket {
 public:
  UniqueSocket() = default;
  explicit UniqueSocket(SOCKET s) : s_(s) {}
  ~UniqueSocket() { reset(); }
  UniqueSocket(UniqueSocket&& o) noexcept : s_(o.release()) {}
  UniqueSocket& operator=(UniqueSocket&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  UniqueSocket(const UniqueSocket&) = delete;
  UniqueSocket& operator=(const UniqueSocket&) = delete;

  SOCKET get() const { return s_; }
  bool valid() const { return s_ != INVALID_SOCKET; }
  SOCKET release() { return std::exchange(s_, INVALID_SOCKET); }
  void reset(SOCKET s = INVALID_SOCKET) {
    if (valid()) closesocket(s_);
    s_ = s;
  }

 private:
  SOCKET s_ = INVALID_SOCKET;
};

std::wstring Widen(std::string_view utf8);
std::string Narrow(std::wstring_view utf16);

// "The pipe has been ended. (error 109)": the system's message for a Win32 or Winsock error code.
std::string ErrorText(DWORD code);

// One argument of a command line, as the C runtime splits it again (CommandLineToArgvW's rules): quoted when it
// holds a space, a tab or a quote, with the backslashes before a quote doubled.
std::wstring QuoteArgument(const std::wstring& arg);

// The full path of this process's executable.
std::wstring ExecutablePath();

// A SID in its string form, "S-1-5-32-544".
StatusOr<std::string> SidText(PSID sid);

// Who a process runs as: its token's user SID and the SIDs of its enabled groups (a deny-only group, such as
// Administrators in a UAC-filtered token, grants nothing, so it is left out).
struct TokenAccounts {
  std::string user_sid;
  std::vector<std::string> group_sids;
};
StatusOr<TokenAccounts> TokenAccountsOf(HANDLE process);

// Winsock for this process, once (reference-counted by Windows; never undone, as gRPC keeps it too).
bool EnsureWinsock();

}  // namespace csi_proxy::host

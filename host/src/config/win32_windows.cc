// See win32_windows.h.
#include "config/win32_windows.h"

#include <sddl.h>

#include <mutex>
#include <vector>

namespace csi_proxy::host {

std::wstring Widen(std::string_view utf8) {
  if (utf8.empty()) return {};
  int n = MultiByteToWideChar(CP_UTF8, 0, utf8.data(), static_cast<int>(utf8.size()), nullptr, 0);
  std::wstring out(static_cast<size_t>(n), L'\0');
  MultiByteToWideChar(CP_UTF8, 0, utf8.data(), static_cast<int>(utf8.size()), out.data(), n);
  return out;
}

std::string Narrow(std::wstring_view utf16) {
  if (utf16.empty()) return {};
  int n = WideCharToMultiByte(CP_UTF8, 0, utf16.data(), static_cast<int>(utf16.size()), nullptr, 0, nullptr, nullptr);
  std::string out(static_cast<size_t>(n), '\0');
  WideCharToMultiByte(CP_UTF8, 0, utf16.data(), static_cast<int>(utf16.size()), out.data(), n, nullptr, nullptr);
  return out;
}

std::string ErrorText(DWORD code) {
  wchar_t* text = nullptr;
  DWORD n = FormatMessageW(FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS,
                           nullptr, code, 0, reinterpret_cast<wchar_t*>(&text), 0, nullptr);
  std::string message;
  if (n > 0 && text != nullptr) {
    message = Narrow(std::wstring_view(text, n));
    while (!message.empty() && (message.back() == '\n' || message.back() == '\r' || message.back() == ' ')) {
      message.pop_back();
    }
  }
  if (text != nullptr) LocalFree(text);
  if (message.empty()) message = "Windows error";
  return message + " (error " + std::to_string(code) + ")";
}

std::wstring QuoteArgument(const std::wstring& arg) {
  if (!arg.empty() && arg.find_first_of(L" \t\"") == std::wstring::npos) return arg;
  std::wstring out = L"\"";
  size_t backslashes = 0;
  for (wchar_t c : arg) {
    if (c == L'\\') {
      ++backslashes;
      continue;
    }
    out.append(c == L'"' ? backslashes * 2 + 1 : backslashes, L'\\');
    backslashes = 0;
    out += c;
  }
  out.append(backslashes * 2, L'\\');
  return out + L"\"";
}

std::wstring ExecutablePath() {
  std::vector<wchar_t> buffer(MAX_PATH);
  for (;;) {
    DWORD n = GetModuleFileNameW(nullptr, buffer.data(), static_cast<DWORD>(buffer.size()));
    if (n == 0) return L"";
    if (n < buffer.size()) return std::wstring(buffer.data(), n);
    buffer.resize(buffer.size() * 2);  // the name was cut short
  }
}

StatusOr<std::string> SidText(PSID sid) {
  wchar_t* text = nullptr;
  if (!ConvertSidToStringSidW(sid, &text)) return Internal("ConvertSidToStringSid: " + ErrorText(GetLastError()));
  std::string out = Narrow(text);
  LocalFree(text);
  return out;
}

namespace {

StatusOr<std::vector<unsigned char>> TokenInfo(HANDLE token, TOKEN_INFORMATION_CLASS what) {
  DWORD size = 0;
  GetTokenInformation(token, what, nullptr, 0, &size);
  if (size == 0) return Internal("GetTokenInformation: " + ErrorText(GetLastError()));
  std::vector<unsigned char> buffer(size);
  if (!GetTokenInformation(token, what, buffer.data(), size, &size)) {
    return Internal("GetTokenInformation: " + ErrorText(GetLastError()));
  }
  return buffer;
}

}  // namespace

StatusOr<TokenAccounts> TokenAccountsOf(HANDLE process) {
  HANDLE raw_token = nullptr;
  if (!OpenProcessToken(process, TOKEN_QUERY, &raw_token)) {
    return PermissionDenied("OpenProcessToken: " + ErrorText(GetLastError()));
  }
  UniqueHandle token(raw_token);
  TokenAccounts accounts;
  CSI_PROXY_ASSIGN_OR_RETURN(auto user, TokenInfo(token.get(), TokenUser));
  CSI_PROXY_ASSIGN_OR_RETURN(accounts.user_sid, SidText(reinterpret_cast<TOKEN_USER*>(user.data())->User.Sid));
  CSI_PROXY_ASSIGN_OR_RETURN(auto groups_buffer, TokenInfo(token.get(), TokenGroups));
  const auto* groups = reinterpret_cast<const TOKEN_GROUPS*>(groups_buffer.data());
  for (DWORD i = 0; i < groups->GroupCount; ++i) {
    DWORD attributes = groups->Groups[i].Attributes;
    if ((attributes & SE_GROUP_ENABLED) == 0 || (attributes & SE_GROUP_USE_FOR_DENY_ONLY) != 0) continue;
    CSI_PROXY_ASSIGN_OR_RETURN(auto sid, SidText(groups->Groups[i].Sid));
    accounts.group_sids.push_back(std::move(sid));
  }
  return accounts;
}

bool EnsureWinsock() {
  static const bool ok = [] {
    WSADATA data;
    return WSAStartup(MAKEWORD(2, 2), &data) == 0;
  }();
  return ok;
}

}  // namespace csi_proxy::host

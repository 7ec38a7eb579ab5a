// Win32 basics; see win32_windows.h.
#include "win32_windows.h"

namespace csi_proxy::common {

StatusOr<std::wstring> Utf8ToWide(std::string_view text) {
  if (text.empty()) return std::wstring();
  const int size = static_cast<int>(text.size());
  int n = ::MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, text.data(), size, nullptr, 0);
  if (n <= 0) return InvalidArgument("not valid UTF-8");
  std::wstring out(static_cast<size_t>(n), L'\0');
  ::MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, text.data(), size, out.data(), n);
  return out;
}

std::string WideToUtf8(std::wstring_view text) {
  if (text.empty()) return std::string();
  const int size = static_cast<int>(text.size());
  int n = ::WideCharToMultiByte(CP_UTF8, 0, text.data(), size, nullptr, 0, nullptr, nullptr);
  std::string out(static_cast<size_t>(n > 0 ? n : 0), '\0');
  if (n > 0) ::WideCharToMultiByte(CP_UTF8, 0, text.data(), size, out.data(), n, nullptr, nullptr);
  return out;
}

std::string Win32Message(std::string_view what, DWORD error) {
  wchar_t* buffer = nullptr;
  DWORD n =
      ::FormatMessageW(FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS,
                       nullptr, error, 0, reinterpret_cast<wchar_t*>(&buffer), 0, nullptr);
  std::wstring text = n > 0 && buffer != nullptr ? std::wstring(buffer, n) : std::wstring();
  if (buffer != nullptr) ::LocalFree(buffer);
  while (!text.empty() &&
         (text.back() == L'\n' || text.back() == L'\r' || text.back() == L' ' || text.back() == L'.')) {
    text.pop_back();
  }
  std::string message = text.empty() ? "Windows error" : WideToUtf8(text);
  return std::string(what) + ": " + message + " (error " + std::to_string(error) + ")";
}

Status Win32Status(DWORD error, const std::string& what) {
  std::string message = Win32Message(what, error);
  switch (error) {
    case ERROR_FILE_NOT_FOUND:
    case ERROR_PATH_NOT_FOUND:
    case ERROR_SERVICE_DOES_NOT_EXIST:
      return NotFound(std::move(message));
    case ERROR_ALREADY_EXISTS:
    case ERROR_FILE_EXISTS:
    case ERROR_SERVICE_EXISTS:
      return AlreadyExists(std::move(message));
    case ERROR_ACCESS_DENIED:
    case ERROR_PRIVILEGE_NOT_HELD:
      return PermissionDenied(std::move(message));
    case ERROR_DIR_NOT_EMPTY:
    case ERROR_SHARING_VIOLATION:
    case ERROR_DIRECTORY:
    case ERROR_NOT_SUPPORTED:
    case ERROR_NOT_A_REPARSE_POINT:
    case ERROR_WRITE_PROTECT:
    case ERROR_SERVICE_DISABLED:
    case ERROR_DEPENDENT_SERVICES_RUNNING:
    case ERROR_SERVICE_MARKED_FOR_DELETE:
      return FailedPrecondition(std::move(message));
    case ERROR_SERVICE_DATABASE_LOCKED:  // the SCM is busy starting another service: worth asking again
      return Unavailable(std::move(message));
    case ERROR_INVALID_NAME:
    case ERROR_BAD_PATHNAME:
    case ERROR_FILENAME_EXCED_RANGE:
      return InvalidArgument(std::move(message));
    default:
      return Internal(std::move(message));
  }
}

Status NtStatusToStatus(NTSTATUS status, const std::string& what) {
  return Win32Status(::RtlNtStatusToDosError(status), what);
}

}  // namespace csi_proxy::common

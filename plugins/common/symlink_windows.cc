// Symlinks on handles; see symlink_windows.h.
#include "symlink_windows.h"

#include <windows.h>
#include <winioctl.h>

#include <mutex>
#include <vector>

#include "confined_open_windows.h"
#include "reparse_data.h"

namespace csi_proxy::common {
namespace {

constexpr NTSTATUS kStatusObjectNameCollision = static_cast<NTSTATUS>(0xC0000035);
constexpr NTSTATUS kStatusObjectNameNotFound = static_cast<NTSTATUS>(0xC0000034);
constexpr NTSTATUS kStatusObjectPathNotFound = static_cast<NTSTATUS>(0xC000003A);
constexpr NTSTATUS kStatusDeletePending = static_cast<NTSTATUS>(0xC0000056);

// SeCreateSymbolicLinkPrivilege must be enabled, not only held, for FSCTL_SET_REPARSE_POINT of a symlink; the
// accounts csi-proxy runs as (LocalSystem, an elevated administrator) hold it.
void EnableSymlinkPrivilege() {
  static std::once_flag once;
  std::call_once(once, [] {
    HANDLE token = nullptr;
    if (!::OpenProcessToken(::GetCurrentProcess(), TOKEN_ADJUST_PRIVILEGES | TOKEN_QUERY, &token)) return;
    TOKEN_PRIVILEGES privileges{};
    privileges.PrivilegeCount = 1;
    privileges.Privileges[0].Attributes = SE_PRIVILEGE_ENABLED;
    if (::LookupPrivilegeValueW(nullptr, L"SeCreateSymbolicLinkPrivilege", &privileges.Privileges[0].Luid)) {
      ::AdjustTokenPrivileges(token, FALSE, &privileges, 0, nullptr, nullptr);
    }
    ::CloseHandle(token);
  });
}

}  // namespace

StatusOr<EntryAt> ReadEntryAt(HANDLE dir, std::wstring_view name, const std::string& shown) {
  UniqueHandle entry;
  NTSTATUS status = OpenBelow(dir, name, FILE_READ_ATTRIBUTES, 0, entry);
  if (status == kStatusObjectNameNotFound || status == kStatusObjectPathNotFound || status == kStatusDeletePending) {
    return EntryAt{};
  }
  if (status < 0) return NtStatusToStatus(status, "examining " + shown);
  CSI_PROXY_ASSIGN_OR_RETURN(EntryInfo info, ReadEntryInfo(entry.get(), shown));
  EntryAt at{.exists = true};
  if (info.reparse && info.reparse->kind == ReparsePoint::Kind::kSymlink) {
    at.symlink_target = WideToUtf8(ToWide(info.reparse->target));
  }
  return at;
}

Status MakeSymlinkAt(HANDLE dir, std::wstring_view name, std::string_view target, bool directory,
                     const std::string& shown) {
  CSI_PROXY_ASSIGN_OR_RETURN(std::wstring wide_target, Utf8ToWide(target));
  UniqueHandle created;
  NTSTATUS status = OpenBelow(dir, name, FILE_WRITE_DATA | FILE_WRITE_ATTRIBUTES | FILE_READ_ATTRIBUTES | DELETE,
                              directory ? FILE_DIRECTORY_FILE : FILE_NON_DIRECTORY_FILE, created, FILE_CREATE);
  const std::string what = "creating " + shown;
  if (status == kStatusObjectNameCollision) return AlreadyExists(shown + " already exists");
  if (status < 0) return NtStatusToStatus(status, what);

  EnableSymlinkPrivilege();
  std::vector<uint8_t> data = AbsoluteSymlinkData(std::u16string(wide_target.begin(), wide_target.end()));
  DWORD ignored = 0;
  if (::DeviceIoControl(created.get(), FSCTL_SET_REPARSE_POINT, data.data(), static_cast<DWORD>(data.size()), nullptr,
                        0, &ignored, nullptr)) {
    return Status::Ok();
  }
  // Nothing half-made stays: the empty placeholder goes again.
  DWORD err = ::GetLastError();
  FILE_DISPOSITION_INFO remove{TRUE};
  ::SetFileInformationByHandle(created.get(), FileDispositionInfo, &remove, sizeof remove);
  if (err == ERROR_NOT_SUPPORTED || err == ERROR_INVALID_FUNCTION) {
    return FailedPrecondition(what + ": the file system there cannot hold symlinks");
  }
  if (err == ERROR_PRIVILEGE_NOT_HELD) {
    return FailedPrecondition(what + ": csi-proxy lacks SeCreateSymbolicLinkPrivilege (run it as LocalSystem or " +
                              "an administrator)");
  }
  return Win32Status(err, what);
}

}  // namespace csi_proxy::common

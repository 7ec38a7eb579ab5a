// See shared_library.h: the loader takes the checked file by its final path (where it really is, after links and
// junctions, in directories only trusted accounts may change; the host holds it open, sharing no writes). The
// loader hands back the module already loaded from a path, even when a new build has been put at that path since
// (a loaded DLL can be renamed away, not overwritten), so the new build is then loaded from a private copy, made
// from the checked open file in a fresh directory only SYSTEM, Administrators and the host's own account may
// change, and removed once the library is unloaded. The loader's reason is the Win32 error, said in words an admin
// can act on; a file's identity is its volume, file index, size and last write time.
#include "abi/shared_library.h"

#include "config/win32_windows.h"  // winsock2.h and windows.h, before the headers that need them

#include <aclapi.h>
#include <sddl.h>

#include <atomic>
#include <string>
#include <vector>

namespace csi_proxy::host {
namespace {

// What a private copy leaves behind to remove: the directory made for it and the file in it.
struct PrivateCopy {
  std::wstring directory;
  std::wstring file;
};

// A directory of its own under the temporary directory, that no other user may add to or change.
StatusOr<std::wstring> MakePrivateDirectory() {
  static std::atomic<unsigned> counter{0};
  wchar_t temp[MAX_PATH + 1];
  DWORD n = GetTempPathW(MAX_PATH + 1, temp);
  if (n == 0 || n > MAX_PATH) return FailedPrecondition("no temporary directory: " + ErrorText(GetLastError()));
  PSECURITY_DESCRIPTOR descriptor = nullptr;
  // Owner rights (the host's account), SYSTEM and Administrators; protected from what the parent would pass on.
  if (!ConvertStringSecurityDescriptorToSecurityDescriptorW(L"D:P(A;OICI;FA;;;OW)(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)",
                                                            SDDL_REVISION_1, &descriptor, nullptr)) {
    return Internal("the private copy's security descriptor: " + ErrorText(GetLastError()));
  }
  SECURITY_ATTRIBUTES attributes{sizeof attributes, descriptor, FALSE};
  Status failed;
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::wstring dir = std::wstring(temp) + L"csi-proxy-" + std::to_wstring(GetCurrentProcessId()) + L"-" +
                       std::to_wstring(counter.fetch_add(1));
    // A name that exists already (another process's, or a squatter's) is never used.
    if (CreateDirectoryW(dir.c_str(), &attributes)) {
      LocalFree(descriptor);
      return dir;
    }
    if (GetLastError() != ERROR_ALREADY_EXISTS) {
      failed =
          FailedPrecondition("cannot make a directory for a private copy of the library: " + ErrorText(GetLastError()));
      break;
    }
  }
  LocalFree(descriptor);
  return failed.ok() ? FailedPrecondition("cannot make a directory for a private copy of the library") : failed;
}

// The path the open `file` was reached by, after links and junctions, without the \\?\ prefix.
StatusOr<std::wstring> FinalPathOf(HANDLE file) {
  std::vector<wchar_t> buffer(MAX_PATH);
  DWORD n = GetFinalPathNameByHandleW(file, buffer.data(), static_cast<DWORD>(buffer.size()), 0);
  if (n >= buffer.size()) {
    buffer.resize(n + 1);
    n = GetFinalPathNameByHandleW(file, buffer.data(), static_cast<DWORD>(buffer.size()), 0);
  }
  if (n == 0 || n >= buffer.size()) {
    return FailedPrecondition("cannot tell where the library file is: " + ErrorText(GetLastError()));
  }
  std::wstring name(buffer.data(), n);
  if (name.rfind(L"\\\\?\\UNC\\", 0) == 0) return L"\\\\" + name.substr(8);
  if (name.rfind(L"\\\\?\\", 0) == 0) return name.substr(4);
  return name;
}

// Copies what the open `from` holds, from its start, into the new file `to`.
Status CopyOpenFile(HANDLE from, const std::wstring& to) {
  UniqueHandle out(CreateFileW(to.c_str(), GENERIC_WRITE, 0, nullptr, CREATE_NEW, FILE_ATTRIBUTE_NORMAL, nullptr));
  if (!out.valid())
    return FailedPrecondition("cannot make a private copy of the library: " + ErrorText(GetLastError()));
  std::vector<char> buffer(1 << 16);
  for (uint64_t at = 0;;) {
    OVERLAPPED where{};
    where.Offset = static_cast<DWORD>(at);
    where.OffsetHigh = static_cast<DWORD>(at >> 32);
    DWORD n = 0;
    if (!ReadFile(from, buffer.data(), static_cast<DWORD>(buffer.size()), &n, &where)) {
      if (GetLastError() == ERROR_HANDLE_EOF) return Status::Ok();
      return FailedPrecondition("cannot read the library to copy it: " + ErrorText(GetLastError()));
    }
    if (n == 0) return Status::Ok();
    DWORD written = 0;
    if (!WriteFile(out.get(), buffer.data(), n, &written, nullptr) || written != n) {
      return FailedPrecondition("cannot make a private copy of the library: " + ErrorText(GetLastError()));
    }
    at += n;
  }
}

}  // namespace

StatusOr<std::string> LoadPath(const TrustedFile& file, intptr_t& copy) {
  // The final path, not the one configured: a link or junction on the way cannot lead the loader elsewhere.
  HANDLE handle = reinterpret_cast<HANDLE>(file.handle());
  CSI_PROXY_ASSIGN_OR_RETURN(std::wstring path, FinalPathOf(handle));
  if (GetModuleHandleW(path.c_str()) == nullptr) return Narrow(path);
  CSI_PROXY_ASSIGN_OR_RETURN(std::wstring dir, MakePrivateDirectory());
  std::wstring copied = dir + L"\\" + path.substr(path.find_last_of(L"\\/") + 1);
  if (Status made = CopyOpenFile(handle, copied); !made.ok()) {
    DeleteFileW(copied.c_str());
    RemoveDirectoryW(dir.c_str());
    return made;
  }
  copy = reinterpret_cast<intptr_t>(new PrivateCopy{dir, copied});
  return Narrow(copied);
}

void ReleasePrivateCopy(intptr_t copy) {
  if (copy == -1) return;
  std::unique_ptr<PrivateCopy> owned(reinterpret_cast<PrivateCopy*>(copy));
  DeleteFileW(owned->file.c_str());
  RemoveDirectoryW(owned->directory.c_str());
}

std::string LastLoadError() {
  DWORD error = GetLastError();
  switch (error) {
    case ERROR_MOD_NOT_FOUND:
      return "a DLL it depends on was not found (" + ErrorText(error) + ")";
    case ERROR_PROC_NOT_FOUND:
      return "a function it imports is missing from a DLL it depends on (" + ErrorText(error) + ")";
    case ERROR_BAD_EXE_FORMAT:
      return "it is not a 64-bit Windows DLL (" + ErrorText(error) + ")";
    case ERROR_DLL_INIT_FAILED:
      return "its initialization (DllMain) failed (" + ErrorText(error) + ")";
    case ERROR_SUCCESS:
      return "";
    default:
      return ErrorText(error);
  }
}

std::string LibraryFileIdentity(const std::string& path) {
  UniqueHandle file(CreateFileW(Widen(path).c_str(), FILE_READ_ATTRIBUTES,
                                FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr, OPEN_EXISTING, 0,
                                nullptr));
  BY_HANDLE_FILE_INFORMATION info{};
  if (!file.valid() || !GetFileInformationByHandle(file.get(), &info)) return {};
  auto join = [](DWORD high, DWORD low) { return (static_cast<uint64_t>(high) << 32) | low; };
  return std::to_string(info.dwVolumeSerialNumber) + ":" +
         std::to_string(join(info.nFileIndexHigh, info.nFileIndexLow)) + ":" +
         std::to_string(join(info.nFileSizeHigh, info.nFileSizeLow)) + ":" +
         std::to_string(join(info.ftLastWriteTime.dwHighDateTime, info.ftLastWriteTime.dwLowDateTime));
}

}  // namespace csi_proxy::host

// The Windows side of the state records (state_records.h): a directory for SYSTEM, Administrators and its owner
// only (made so when missing, with a protected DACL; one whose place holds a reparse point is refused), files
// written as a temporary file, flushed and moved over the record with MoveFileEx (write-through), and locks taken
// with LockFileEx on a lock file. The directory lies under [host] state_dir, which the host refuses to use when
// others may change it.
#include <windows.h>

#include <sddl.h>

#include <memory>
#include <random>
#include <vector>

#include "state_records.h"
#include "text.h"
#include "win32_windows.h"

namespace csi_proxy::common {
namespace {

std::string Join(const std::string& dir, const std::string& name) { return dir + "\\" + name; }

// mkdir -p: missing directories are made, the last one for SYSTEM, Administrators and its owner only.
Status MakeDirectories(const std::string& dir) {
  CSI_PROXY_ASSIGN_OR_RETURN(std::wstring wide, Utf8ToWide(dir));
  for (auto& c : wide) c = c == L'/' ? L'\\' : c;
  if (wide.size() < 3 || wide[1] != L':' || wide[2] != L'\\') {
    return Internal("the records directory " + dir + " is not an absolute path");
  }
  PSECURITY_DESCRIPTOR descriptor = nullptr;
  if (!::ConvertStringSecurityDescriptorToSecurityDescriptorW(L"D:P(A;OICI;FA;;;OW)(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)",
                                                              SDDL_REVISION_1, &descriptor, nullptr)) {
    return Win32Status(::GetLastError(), "making the security descriptor of " + dir);
  }
  std::unique_ptr<void, decltype(&::LocalFree)> owned(descriptor, &::LocalFree);
  for (size_t at = 3; at <= wide.size(); ++at) {
    if (at != wide.size() && wide[at] != L'\\') continue;
    const std::wstring part = wide.substr(0, at);
    SECURITY_ATTRIBUTES attributes{sizeof attributes, at == wide.size() ? descriptor : nullptr, FALSE};
    if (!::CreateDirectoryW(part.c_str(), &attributes) && ::GetLastError() != ERROR_ALREADY_EXISTS) {
      return Win32Status(::GetLastError(), "cannot create " + WideToUtf8(part));
    }
  }
  return Status::Ok();
}

// Whether the records directory is there (false when it is missing and `create` is false); a reparse point in its
// place is refused: records decide what the groups unmap.
StatusOr<bool> OpenDir(const std::string& dir, bool create) {
  if (create) CSI_PROXY_RETURN_IF_ERROR(MakeDirectories(dir));
  CSI_PROXY_ASSIGN_OR_RETURN(std::wstring wide, Utf8ToWide(dir));
  const DWORD attributes = ::GetFileAttributesW(wide.c_str());
  if (attributes == INVALID_FILE_ATTRIBUTES) {
    const DWORD err = ::GetLastError();
    if (!create && (err == ERROR_FILE_NOT_FOUND || err == ERROR_PATH_NOT_FOUND)) return false;
    return Win32Status(err, "opening the records directory " + dir);
  }
  if ((attributes & FILE_ATTRIBUTE_REPARSE_POINT) != 0 || (attributes & FILE_ATTRIBUTE_DIRECTORY) == 0) {
    return PermissionDenied("the records directory " + dir + " must be a plain directory (not a link)");
  }
  return true;
}

// A record file, read without following a reparse point; nullopt when missing.
StatusOr<std::optional<RecordFields>> ReadRecord(const std::string& path) {
  CSI_PROXY_ASSIGN_OR_RETURN(std::wstring wide, Utf8ToWide(path));
  UniqueHandle file(::CreateFileW(wide.c_str(), GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                                  nullptr, OPEN_EXISTING, FILE_FLAG_OPEN_REPARSE_POINT, nullptr));
  if (!file.valid()) {
    const DWORD err = ::GetLastError();
    if (err == ERROR_FILE_NOT_FOUND || err == ERROR_PATH_NOT_FOUND) return std::optional<RecordFields>();
    return Win32Status(err, "cannot read the record " + path);
  }
  BY_HANDLE_FILE_INFORMATION info{};
  if (!::GetFileInformationByHandle(file.get(), &info)) return Win32Status(::GetLastError(), "examining " + path);
  if ((info.dwFileAttributes & (FILE_ATTRIBUTE_REPARSE_POINT | FILE_ATTRIBUTE_DIRECTORY)) != 0) {
    return Internal("the record " + path + " is not a plain file");
  }
  if (info.nFileSizeHigh != 0 || info.nFileSizeLow > kMaxRecordBytes) {
    return Internal("the record " + path + " is larger than " + std::to_string(kMaxRecordBytes) + " bytes");
  }
  std::string text(info.nFileSizeLow, '\0');
  DWORD read = 0;
  if (!text.empty() && !::ReadFile(file.get(), text.data(), static_cast<DWORD>(text.size()), &read, nullptr)) {
    return Win32Status(::GetLastError(), "cannot read the record " + path);
  }
  text.resize(read);
  return std::optional<RecordFields>(ParseRecord(text));
}

// Writes `content` to `path` so that readers see the old or the new file: a new temporary file beside it,
// written, flushed and moved over it (write-through).
Status WriteFileAtomically(const std::string& path, const std::string& content) {
  std::random_device random;
  std::wstring tmp;
  UniqueHandle file;
  for (int attempt = 0; attempt < 16 && !file.valid(); ++attempt) {
    CSI_PROXY_ASSIGN_OR_RETURN(tmp, Utf8ToWide(path + ".tmp." + std::to_string(random())));
    file.Reset(::CreateFileW(tmp.c_str(), GENERIC_WRITE, 0, nullptr, CREATE_NEW, FILE_ATTRIBUTE_NORMAL, nullptr));
    if (!file.valid() && ::GetLastError() != ERROR_FILE_EXISTS) {
      return Win32Status(::GetLastError(), "cannot create a temporary file for " + path);
    }
  }
  if (!file.valid()) return Internal("cannot create a temporary file for " + path);
  DWORD written = 0;
  const bool ok = ::WriteFile(file.get(), content.data(), static_cast<DWORD>(content.size()), &written, nullptr) &&
                  written == content.size() && ::FlushFileBuffers(file.get());
  const DWORD err = ::GetLastError();
  file.Reset();
  CSI_PROXY_ASSIGN_OR_RETURN(std::wstring target, Utf8ToWide(path));
  if (!ok || !::MoveFileExW(tmp.c_str(), target.c_str(), MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH)) {
    const DWORD failure = ok ? ::GetLastError() : err;
    ::DeleteFileW(tmp.c_str());
    return Win32Status(failure, "cannot write " + path);
  }
  return Status::Ok();
}

// A lock file held open and locked; unlocked and closed with it.
struct HeldLock {
  UniqueHandle file;
  ~HeldLock() {
    OVERLAPPED at{};
    if (file.valid()) ::UnlockFileEx(file.get(), 0, 1, 0, &at);
  }
};

}  // namespace

StatusOr<std::optional<RecordFields>> StateRecords::Get(std::string_view key) const {
  CSI_PROXY_ASSIGN_OR_RETURN(bool there, OpenDir(dir_, false));
  if (!there) return std::optional<RecordFields>();
  CSI_PROXY_ASSIGN_OR_RETURN(auto record, ReadRecord(Join(dir_, RecordFile(key))));
  if (!record || record->count("key") == 0 || (*record)["key"] != key) return std::optional<RecordFields>();
  return record;
}

Status StateRecords::Put(std::string_view key, RecordFields fields) const {
  CSI_PROXY_RETURN_IF_ERROR(OpenDir(dir_, true).status());
  fields["key"] = std::string(key);
  return WriteFileAtomically(Join(dir_, RecordFile(key)), FormatRecord(fields));
}

Status StateRecords::Remove(std::string_view key) const {
  CSI_PROXY_ASSIGN_OR_RETURN(bool there, OpenDir(dir_, false));
  if (!there) return Status::Ok();
  const std::string path = Join(dir_, RecordFile(key));
  // Only the record of this very key goes (a colliding key's record stays).
  CSI_PROXY_ASSIGN_OR_RETURN(auto record, ReadRecord(path));
  if (!record || (*record)["key"] != key) return Status::Ok();
  CSI_PROXY_ASSIGN_OR_RETURN(std::wstring wide, Utf8ToWide(path));
  if (!::DeleteFileW(wide.c_str()) && ::GetLastError() != ERROR_FILE_NOT_FOUND) {
    return Win32Status(::GetLastError(), "cannot remove the record " + path);
  }
  return Status::Ok();
}

StatusOr<std::vector<RecordFields>> StateRecords::List() const {
  std::vector<RecordFields> records;
  CSI_PROXY_ASSIGN_OR_RETURN(bool there, OpenDir(dir_, false));
  if (!there) return records;
  CSI_PROXY_ASSIGN_OR_RETURN(std::wstring pattern, Utf8ToWide(Join(dir_, std::string(kRecordFilePrefix) + "*")));
  WIN32_FIND_DATAW found;
  HANDLE search = ::FindFirstFileExW(pattern.c_str(), FindExInfoBasic, &found, FindExSearchNameMatch, nullptr, 0);
  if (search == INVALID_HANDLE_VALUE) {
    if (::GetLastError() == ERROR_FILE_NOT_FOUND) return records;
    return Win32Status(::GetLastError(), "cannot list " + dir_);
  }
  std::vector<std::string> names;
  do {
    const std::string name = WideToUtf8(found.cFileName);
    // Temporaries of a write in progress ("r-<hash>.tmp.N") are not records.
    if (name.size() == kRecordFilePrefix.size() + 16) names.push_back(name);
  } while (::FindNextFileW(search, &found));
  ::FindClose(search);
  for (const auto& name : names) {
    CSI_PROXY_ASSIGN_OR_RETURN(auto record, ReadRecord(Join(dir_, name)));
    if (record && record->count("key") != 0) records.push_back(std::move(*record));
  }
  return records;
}

StatusOr<RecordLock> StateRecords::Lock(std::string_view name) const {
  CSI_PROXY_RETURN_IF_ERROR(OpenDir(dir_, true).status());
  const std::string path = Join(dir_, LockFile(name));
  CSI_PROXY_ASSIGN_OR_RETURN(std::wstring wide, Utf8ToWide(path));
  auto held = std::make_shared<HeldLock>();
  held->file.Reset(::CreateFileW(wide.c_str(), GENERIC_READ | GENERIC_WRITE,
                                 FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr, OPEN_ALWAYS,
                                 FILE_ATTRIBUTE_NORMAL | FILE_FLAG_OPEN_REPARSE_POINT, nullptr));
  if (!held->file.valid()) return Win32Status(::GetLastError(), "cannot open the lock " + path);
  OVERLAPPED at{};
  if (!::LockFileEx(held->file.get(), LOCKFILE_EXCLUSIVE_LOCK, 0, 1, 0, &at)) {
    const DWORD err = ::GetLastError();
    held->file.Reset();
    return Win32Status(err, "cannot lock " + path);
  }
  return RecordLock(std::move(held));
}

}  // namespace csi_proxy::common

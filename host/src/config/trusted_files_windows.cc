// See trusted_files.h: on Windows a file is opened once, then the open file and every directory of its final path
// (after links and junctions: where it really is) are checked, and from then on the host uses that open file, or
// its final path, never the path it was given again. A file or directory is trusted when its owner is SYSTEM, the
// Administrators group, TrustedInstaller or the host's own account, and its DACL lets nobody else change it:
// write, append, delete, change its DACL or owner; for a directory on the way, delete what is in it, change its
// DACL or owner, or delete it (adding new entries replaces nothing, which is why every user may create folders in
// C:\); a directory the host makes entries in (state_dir, the audit log's) takes no new entries from others. Deny
// entries only take rights away, so only allow entries count; a missing (null) DACL lets everyone do everything.
// A file to read is opened sharing reads and deletion, not writes: an admin may still rename a loaded DLL away to
// put a new build in its place, as Windows allows for a loaded DLL.
#include "config/trusted_files.h"

#include "config/win32_windows.h"  // winsock2.h and windows.h, before the headers that need them

#include <aclapi.h>
#include <sddl.h>

#include <cctype>
#include <cstdio>
#include <vector>

namespace csi_proxy::host {
namespace {

constexpr const char* kSystemSid = "S-1-5-18";
constexpr const char* kAdministratorsSid = "S-1-5-32-544";
constexpr const char* kTrustedInstallerSid = "S-1-5-80-956008885-3418522649-1831038044-1853292631-2271478464";
constexpr const char* kCreatorOwnerSid = "S-1-3-0";  // only in inherit-only entries, which are skipped anyway

std::string SidOrPlaceholder(PSID sid) {
  auto text = SidText(sid);
  return text.ok() ? *text : "an unreadable SID";
}

// "BUILTIN\Users (S-1-5-32-545)", or the SID alone when it has no name here.
std::string AccountName(PSID sid) {
  wchar_t name[256], domain[256];
  DWORD name_size = 256, domain_size = 256;
  SID_NAME_USE use;
  std::string text = SidOrPlaceholder(sid);
  if (!LookupAccountSidW(nullptr, sid, name, &name_size, domain, &domain_size, &use)) return text;
  std::string account = domain_size > 0 ? Narrow(domain) + "\\" + Narrow(name) : Narrow(name);
  return account + " (" + text + ")";
}

const std::string& HostUserSid() {
  static const std::string sid = [] {
    auto accounts = TokenAccountsOf(GetCurrentProcess());
    return accounts.ok() ? accounts->user_sid : std::string();
  }();
  return sid;
}

bool Trusted(PSID sid) {
  std::string text = SidOrPlaceholder(sid);
  return text == kSystemSid || text == kAdministratorsSid || text == kTrustedInstallerSid || text == kCreatorOwnerSid ||
         (!HostUserSid().empty() && text == HostUserSid());
}

enum class Kind {
  kFile,
  kDirectoryAbove,  // on the way: adding entries to it replaces nothing the host uses
  kDirectory,       // one the host (or a group) makes entries in by name: another's entry there would be used
};

// The rights by which another account could change what the host reads there.
ACCESS_MASK ChangingRights(Kind kind) {
  ACCESS_MASK rights = DELETE | WRITE_DAC | WRITE_OWNER | GENERIC_ALL;
  if (kind == Kind::kDirectoryAbove) return rights | FILE_DELETE_CHILD;
  if (kind == Kind::kDirectory)
    return rights | FILE_DELETE_CHILD | FILE_ADD_FILE | FILE_ADD_SUBDIRECTORY | GENERIC_WRITE;
  return rights | FILE_WRITE_DATA | FILE_APPEND_DATA | GENERIC_WRITE;
}

// Why an object with this owner and DACL is not to be trusted, or "" when it is.
std::string Untrusted(PSID owner, PACL dacl, Kind kind) {
  if (owner == nullptr || !Trusted(owner)) {
    return "is owned by " + (owner ? AccountName(owner) : std::string("nobody")) +
           ", not by SYSTEM, Administrators or the host's account";
  }
  if (dacl == nullptr) return "has no DACL, so every user may change it";
  for (DWORD i = 0; i < dacl->AceCount; ++i) {
    void* raw = nullptr;
    if (!GetAce(dacl, i, &raw)) continue;
    const auto* header = static_cast<const ACE_HEADER*>(raw);
    if (header->AceType != ACCESS_ALLOWED_ACE_TYPE || (header->AceFlags & INHERIT_ONLY_ACE) != 0) continue;
    const auto* ace = static_cast<const ACCESS_ALLOWED_ACE*>(raw);
    PSID sid = const_cast<DWORD*>(&ace->SidStart);
    if ((ace->Mask & ChangingRights(kind)) != 0 && !Trusted(sid)) {
      char mask[16];
      std::snprintf(mask, sizeof mask, "0x%lx", static_cast<unsigned long>(ace->Mask));
      return "lets " + AccountName(sid) + " change it (access mask " + mask + ")";
    }
  }
  return "";
}

// Why the open `handle` (a file or a directory) is not to be trusted, or "".
std::string UntrustedHandle(HANDLE handle, Kind kind) {
  PSID owner = nullptr;
  PACL dacl = nullptr;
  PSECURITY_DESCRIPTOR descriptor = nullptr;
  DWORD error = GetSecurityInfo(handle, SE_FILE_OBJECT, OWNER_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION, &owner,
                                nullptr, &dacl, nullptr, &descriptor);
  std::string why = error == ERROR_SUCCESS ? Untrusted(owner, dacl, kind) : "cannot be examined: " + ErrorText(error);
  if (descriptor != nullptr) LocalFree(descriptor);
  return why;
}

// The path the system reached `handle` by, after links and junctions, without the \\?\ prefix.
std::string FinalPath(HANDLE handle, const std::string& fallback) {
  std::vector<wchar_t> buffer(MAX_PATH);
  DWORD n = GetFinalPathNameByHandleW(handle, buffer.data(), static_cast<DWORD>(buffer.size()), 0);
  if (n >= buffer.size()) {
    buffer.resize(n + 1);
    n = GetFinalPathNameByHandleW(handle, buffer.data(), static_cast<DWORD>(buffer.size()), 0);
  }
  if (n == 0 || n >= buffer.size()) return fallback;
  std::wstring name(buffer.data(), n);
  if (name.rfind(L"\\\\?\\UNC\\", 0) == 0) return "\\\\" + Narrow(name.substr(8));
  if (name.rfind(L"\\\\?\\", 0) == 0) return Narrow(name.substr(4));
  return Narrow(name);
}

// The directories of `path` from its root down, the last one first: C:\a\b\f -> C:\a\b, C:\a, C:\.
std::vector<std::string> DirectoriesAbove(const std::string& path) {
  std::vector<std::string> out;
  std::string dir = path;
  for (;;) {
    size_t slash = dir.find_last_of("\\/");
    if (slash == std::string::npos) break;
    std::string parent = dir.substr(0, slash);
    if (parent.size() == 2 && parent[1] == ':') parent += "\\";  // a drive's root keeps its separator
    if (parent == dir || parent.empty() || parent.size() < 3) break;
    out.push_back(parent);
    if (parent.size() == 3 && parent[1] == ':') break;
    dir = parent;
  }
  return out;
}

// Every directory above the file's final path is trusted.
Status CheckDirectoriesAbove(const std::string& final_path, const std::string& path, const std::string& what) {
  for (const std::string& dir : DirectoriesAbove(final_path)) {
    UniqueHandle handle(CreateFileW(Widen(dir).c_str(), READ_CONTROL,
                                    FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr, OPEN_EXISTING,
                                    FILE_FLAG_BACKUP_SEMANTICS, nullptr));
    if (!handle.valid()) {
      return FailedPrecondition("cannot examine " + dir + " (on the way to " + what + " " + path +
                                "): " + ErrorText(GetLastError()));
    }
    if (std::string why = UntrustedHandle(handle.get(), Kind::kDirectoryAbove); !why.empty()) {
      return PermissionDenied(what + " " + path + " lies in " + dir + ", which " + why +
                              "; anyone who can change it there can replace it" + kUntrustedHint);
    }
  }
  return Status::Ok();
}

bool IsPipeNamespace(const std::string& path) {
  std::string lower;
  for (char c : path) lower += static_cast<char>(c == '/' ? '\\' : std::tolower(static_cast<unsigned char>(c)));
  while (!lower.empty() && lower.back() == '\\') lower.pop_back();
  return lower == R"(\\.\pipe)";
}

// Opens `path` with `access` and checks it and the directories above it.
StatusOr<TrustedFile> OpenChecked(const std::string& path, const std::string& what, DWORD access, DWORD share,
                                  DWORD disposition, SECURITY_ATTRIBUTES* create_with) {
  HANDLE raw = CreateFileW(Widen(path).c_str(), access | READ_CONTROL, share, create_with, disposition,
                           FILE_ATTRIBUTE_NORMAL, nullptr);
  if (raw == INVALID_HANDLE_VALUE) {
    DWORD error = GetLastError();
    if (error == ERROR_FILE_NOT_FOUND || error == ERROR_PATH_NOT_FOUND) {
      return NotFound("cannot open " + what + " " + path + ": it does not exist");
    }
    return FailedPrecondition("cannot open " + what + " " + path + ": " + ErrorText(error) +
                              (error == ERROR_SHARING_VIOLATION ? " (another process is writing it)" : ""));
  }
  TrustedFile file(path, reinterpret_cast<intptr_t>(raw));
  DWORD type = GetFileType(raw);
  BY_HANDLE_FILE_INFORMATION info{};
  if (type == FILE_TYPE_DISK && GetFileInformationByHandle(raw, &info) &&
      (info.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) != 0) {
    return FailedPrecondition(what + " " + path + " is a directory");
  }
  if (UntrustedFilesAllowed()) return file;
  if (std::string why = UntrustedHandle(raw, Kind::kFile); !why.empty()) {
    return PermissionDenied(what + " " + path + " " + why + kUntrustedHint);
  }
  // A pipe or a device has no directories; a file's are checked as it was reached.
  if (type == FILE_TYPE_DISK) CSI_PROXY_RETURN_IF_ERROR(CheckDirectoriesAbove(FinalPath(raw, path), path, what));
  return file;
}

}  // namespace

void CloseFileHandle(intptr_t handle) { CloseHandle(reinterpret_cast<HANDLE>(handle)); }

StatusOr<std::string> TrustedFile::ReadAll(size_t max_bytes) const {
  std::string text;
  char buf[8192];
  for (uint64_t at = 0;;) {
    OVERLAPPED where{};
    where.Offset = static_cast<DWORD>(at);
    where.OffsetHigh = static_cast<DWORD>(at >> 32);
    DWORD n = 0;
    if (!ReadFile(reinterpret_cast<HANDLE>(handle_), buf, sizeof buf, &n, &where)) {
      DWORD error = GetLastError();
      if (error == ERROR_HANDLE_EOF) return text;
      return FailedPrecondition("cannot read " + path_ + ": " + ErrorText(error));
    }
    if (n == 0) return text;
    text.append(buf, n);
    at += n;
    if (text.size() > max_bytes) {
      return Status(Code::kResourceExhausted, path_ + " is larger than " + std::to_string(max_bytes) + " bytes");
    }
  }
}

StatusOr<TrustedFile> OpenTrustedFile(const std::string& path, const std::string& what) {
  return OpenChecked(path, what, GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_DELETE, OPEN_EXISTING, nullptr);
}

StatusOr<TrustedFile> OpenTrustedAppendFile(const std::string& path, const std::string& what) {
  // Created for the host's account, SYSTEM and Administrators only (as 0600 is on Linux).
  PSECURITY_DESCRIPTOR descriptor = nullptr;
  if (!ConvertStringSecurityDescriptorToSecurityDescriptorW(L"D:P(A;;FA;;;OW)(A;;FA;;;SY)(A;;FA;;;BA)", SDDL_REVISION_1,
                                                            &descriptor, nullptr)) {
    return Internal("the audit log's security descriptor: " + ErrorText(GetLastError()));
  }
  SECURITY_ATTRIBUTES attributes{sizeof attributes, descriptor, FALSE};
  // Shared for writing too: a reload opens it again while the host still appends through the old handle.
  auto file = OpenChecked(path, what, FILE_APPEND_DATA | SYNCHRONIZE,
                          FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, OPEN_ALWAYS, &attributes);
  LocalFree(descriptor);
  return file;
}

Status CheckTrustedDirectory(const std::string& path, const std::string& what) {
  // The pipe namespace is no directory anyone owns: each pipe carries its own DACL (pipe_sddl), and a pipe name
  // another process holds is refused when the host creates it.
  if (UntrustedFilesAllowed() || IsPipeNamespace(path)) return Status::Ok();
  // A directory that does not exist yet is checked by the directories above it that do (the host creates it).
  std::string dir = path;
  std::vector<std::string> above = DirectoriesAbove(path);
  for (size_t i = 0;; ++i) {
    UniqueHandle handle(CreateFileW(Widen(dir).c_str(), READ_CONTROL | FILE_READ_ATTRIBUTES,
                                    FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr, OPEN_EXISTING,
                                    FILE_FLAG_BACKUP_SEMANTICS, nullptr));
    if (handle.valid()) {
      BY_HANDLE_FILE_INFORMATION info{};
      if (GetFileInformationByHandle(handle.get(), &info) && (info.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) == 0) {
        return FailedPrecondition(what + " " + path + " is not a directory");
      }
      // The directory itself, when it exists, takes no entries from others; one above a missing one may.
      Kind kind = dir == path ? Kind::kDirectory : Kind::kDirectoryAbove;
      if (std::string why = UntrustedHandle(handle.get(), kind); !why.empty()) {
        return PermissionDenied(what + " " + path + (dir == path ? " " + why : " lies in " + dir + ", which " + why) +
                                "; anyone who can change it there can replace what the host keeps in it" +
                                kUntrustedHint);
      }
      return CheckDirectoriesAbove(FinalPath(handle.get(), dir), path, what);
    }
    if (i >= above.size()) return Status::Ok();
    dir = above[i];
  }
}

}  // namespace csi_proxy::host

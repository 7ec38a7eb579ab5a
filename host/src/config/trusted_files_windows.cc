// See trusted_files.h: on Windows a file or directory is trusted when its owner is SYSTEM, the Administrators
// group, TrustedInstaller or the host's own account, and its DACL lets nobody else change it (write, append,
// delete, change its DACL or owner; for a directory also add or delete what is in it). Deny entries only take
// rights away, so only allow entries count; a missing (null) DACL lets everyone do everything.
#include "config/trusted_files.h"

#include "config/win32_windows.h"  // winsock2.h and windows.h, before the headers that need them

#include <aclapi.h>
#include <sddl.h>

#include <atomic>
#include <optional>
#include <vector>

namespace csi_proxy::host {
namespace {

std::atomic<bool> g_allow_untrusted{false};

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
    HANDLE token = nullptr;
    if (!OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &token)) return std::string();
    UniqueHandle owned(token);
    DWORD size = 0;
    GetTokenInformation(token, TokenUser, nullptr, 0, &size);
    std::vector<unsigned char> buffer(size);
    if (size == 0 || !GetTokenInformation(token, TokenUser, buffer.data(), size, &size)) return std::string();
    return SidOrPlaceholder(reinterpret_cast<TOKEN_USER*>(buffer.data())->User.Sid);
  }();
  return sid;
}

bool Trusted(PSID sid) {
  std::string text = SidOrPlaceholder(sid);
  return text == kSystemSid || text == kAdministratorsSid || text == kTrustedInstallerSid || text == kCreatorOwnerSid ||
         (!HostUserSid().empty() && text == HostUserSid());
}

// The rights that change what a file holds, or who may change it; for a directory, also what it holds.
ACCESS_MASK ChangingRights(bool directory) {
  ACCESS_MASK rights =
      FILE_WRITE_DATA | FILE_APPEND_DATA | DELETE | WRITE_DAC | WRITE_OWNER | GENERIC_WRITE | GENERIC_ALL;
  if (directory) rights |= FILE_DELETE_CHILD;  // FILE_ADD_FILE and FILE_ADD_SUBDIRECTORY are the first two
  return rights;
}

// Why an object with this owner and DACL is not to be trusted, or "" when it is.
std::string Untrusted(PSID owner, PACL dacl, bool directory) {
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
    if ((ace->Mask & ChangingRights(directory)) != 0 && !Trusted(sid)) {
      char mask[16];
      std::snprintf(mask, sizeof mask, "0x%lx", static_cast<unsigned long>(ace->Mask));
      return "lets " + AccountName(sid) + " change it (access mask " + mask + ")";
    }
  }
  return "";
}

struct Examined {
  std::string path;  // the final path, after links
  std::string why;   // "" when trusted
  bool directory = false;
};

// Opens `path` (following links, as the loader and the reader will), reads its final path and security.
std::optional<Examined> Examine(const std::string& path) {
  UniqueHandle file(CreateFileW(Widen(path).c_str(), READ_CONTROL | FILE_READ_ATTRIBUTES,
                                FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr, OPEN_EXISTING,
                                FILE_FLAG_BACKUP_SEMANTICS, nullptr));
  if (!file.valid()) return std::nullopt;
  Examined out;
  std::vector<wchar_t> final_path(MAX_PATH);
  DWORD n = GetFinalPathNameByHandleW(file.get(), final_path.data(), static_cast<DWORD>(final_path.size()), 0);
  if (n >= final_path.size()) {
    final_path.resize(n + 1);
    n = GetFinalPathNameByHandleW(file.get(), final_path.data(), static_cast<DWORD>(final_path.size()), 0);
  }
  std::wstring name = n > 0 && n < final_path.size() ? std::wstring(final_path.data(), n) : Widen(path);
  if (name.rfind(L"\\\\?\\UNC\\", 0) == 0) {
    name = L"\\\\" + name.substr(8);
  } else if (name.rfind(L"\\\\?\\", 0) == 0) {
    name = name.substr(4);
  }
  out.path = Narrow(name);
  BY_HANDLE_FILE_INFORMATION info{};
  out.directory = GetFileInformationByHandle(file.get(), &info) && (info.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY);
  PSID owner = nullptr;
  PACL dacl = nullptr;
  PSECURITY_DESCRIPTOR descriptor = nullptr;
  DWORD error = GetSecurityInfo(file.get(), SE_FILE_OBJECT, OWNER_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION,
                                &owner, nullptr, &dacl, nullptr, &descriptor);
  if (error != ERROR_SUCCESS) {
    out.why = "cannot be examined: " + ErrorText(error);
  } else {
    out.why = Untrusted(owner, dacl, out.directory);
  }
  if (descriptor != nullptr) LocalFree(descriptor);
  return out;
}

std::string Parent(const std::string& path) {
  size_t slash = path.find_last_of("\\/");
  if (slash == std::string::npos) return ".";
  if (slash == 2 && path[1] == ':') return path.substr(0, 3);  // a drive root keeps its separator
  return path.substr(0, slash);
}

bool IsPipeNamespace(const std::string& path) {
  std::string lower;
  for (char c : path) lower += static_cast<char>(c == '/' ? '\\' : std::tolower(static_cast<unsigned char>(c)));
  while (!lower.empty() && lower.back() == '\\') lower.pop_back();
  return lower == R"(\\.\pipe)";
}

}  // namespace

void AllowUntrustedFiles() { g_allow_untrusted = true; }

Status CheckTrustedFile(const std::string& path, const std::string& what) {
  if (g_allow_untrusted) return Status::Ok();
  std::optional<Examined> file = Examine(path);
  if (!file) return Status::Ok();  // a missing file is reported by whoever opens it
  if (!file->why.empty()) {
    return PermissionDenied(what + " " + file->path + " " + file->why +
                            "; only SYSTEM and Administrators may be able to change what the host runs "
                            "(--allow-untrusted-files turns this check off for development)");
  }
  std::string dir = Parent(file->path);
  if (std::optional<Examined> parent = Examine(dir); parent && !parent->why.empty()) {
    return PermissionDenied(what + " " + file->path + " lies in " + parent->path + ", which " + parent->why +
                            "; anyone who can write there can replace it");
  }
  return Status::Ok();
}

Status CheckTrustedDirectory(const std::string& path, const std::string& what) {
  // The pipe namespace is no directory anyone owns: each pipe carries its own DACL (pipe_sddl), and a pipe name
  // another process holds is refused when the host creates it.
  if (g_allow_untrusted || IsPipeNamespace(path)) return Status::Ok();
  std::optional<Examined> dir = Examine(path);
  if (!dir) return Status::Ok();  // created by the host itself
  if (!dir->directory) return FailedPrecondition(what + " " + path + " is not a directory");
  if (!dir->why.empty()) {
    return PermissionDenied(what + " " + dir->path + " " + dir->why +
                            "; another user could replace what the host keeps in it (--allow-untrusted-files turns "
                            "this check off for development)");
  }
  return Status::Ok();
}

}  // namespace csi_proxy::host

// The component-by-component walk beneath the allowed roots on Windows; see confined_open_windows.h.
#include "confined_open_windows.h"

#include <winioctl.h>

#include <deque>
#include <vector>

#include "text.h"

namespace csi_proxy::common {
namespace {

// Links followed before giving up, as on Linux (Windows itself stops at 63 reparse points).
constexpr int kMaxLinks = 40;

// The NTSTATUS values the walk tells apart (ntstatus.h is not part of every toolchain's Win32 headers).
constexpr NTSTATUS kStatusObjectNameInvalid = static_cast<NTSTATUS>(0xC0000033);
constexpr NTSTATUS kStatusObjectNameNotFound = static_cast<NTSTATUS>(0xC0000034);
constexpr NTSTATUS kStatusObjectPathNotFound = static_cast<NTSTATUS>(0xC000003A);
constexpr NTSTATUS kStatusDeletePending = static_cast<NTSTATUS>(0xC0000056);
constexpr NTSTATUS kStatusNotADirectory = static_cast<NTSTATUS>(0xC0000103);

// As the file system compares names (CompareStringOrdinal with its case table, not a locale's).
bool EqualIgnoringCase(std::wstring_view a, std::wstring_view b) {
  return ::CompareStringOrdinal(a.data(), static_cast<int>(a.size()), b.data(), static_cast<int>(b.size()), TRUE) ==
         CSTR_EQUAL;
}

StatusOr<UniqueHandle> OpenRootDir(const std::string& root) {
  // The roots come from the admin's configuration and are trusted, links in them included.
  CSI_PROXY_ASSIGN_OR_RETURN(std::wstring wide, Utf8ToWide(root));
  HANDLE h = ::CreateFileW((L"\\\\?\\" + wide).c_str(), FILE_READ_ATTRIBUTES | FILE_LIST_DIRECTORY | SYNCHRONIZE,
                           FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr, OPEN_EXISTING,
                           FILE_FLAG_BACKUP_SEMANTICS, nullptr);
  if (h == INVALID_HANDLE_VALUE) {
    DWORD err = ::GetLastError();
    if (err == ERROR_FILE_NOT_FOUND || err == ERROR_PATH_NOT_FOUND || err == ERROR_DIRECTORY) {
      return NotFound("allowed root " + QuotePath(root) + " does not exist");
    }
    return Win32Status(err, "opening allowed root " + QuotePath(root));
  }
  return UniqueHandle(h);
}

// Whether `target` of a volume mount point found at `dos_path` (with its trailing backslash) is registered there
// with the mount manager: SetVolumeMountPoint registers it, a junction set by hand is not.
bool MountManagerListsMountPoint(const std::wstring& volume, const std::wstring& dos_path) {
  std::vector<wchar_t> names(1024);
  DWORD needed = 0;
  if (!::GetVolumePathNamesForVolumeNameW(volume.c_str(), names.data(), static_cast<DWORD>(names.size()), &needed)) {
    if (::GetLastError() != ERROR_MORE_DATA) return false;
    names.resize(needed);
    if (!::GetVolumePathNamesForVolumeNameW(volume.c_str(), names.data(), static_cast<DWORD>(names.size()), &needed)) {
      return false;
    }
  }
  for (const wchar_t* name = names.data(); *name != L'\0'; name += std::wcslen(name) + 1) {
    if (EqualIgnoringCase(name, dos_path)) return true;
  }
  return false;
}

enum class WalkMode { kParent, kFollow, kCreateDirs };

struct Step {
  std::wstring name;
  bool from_link;  // came from a link's target: never created by kCreateDirs
};

// One walk, as the Linux Walker: kParent returns the directory holding the last component (and its name); the
// other modes return the object itself.
class Walker {
 public:
  Walker(const PathPolicy& policy, const ConfinedPath& path, std::string_view field, WalkMode mode, Access access)
      : policy_(policy), path_(path), field_(field), mode_(mode), access_(access) {}

  StatusOr<OpenedParent> Run() {
    CSI_PROXY_ASSIGN_OR_RETURN(auto root, OpenRootDir(path_.root));
    stack_.push_back(std::move(root));

    std::deque<Step> todo;
    for (auto& part : policy_.Split(path_.relative)) {
      CSI_PROXY_ASSIGN_OR_RETURN(std::wstring wide, Utf8ToWide(part));
      todo.push_back({std::move(wide), false});
    }
    std::wstring last;
    if (mode_ == WalkMode::kParent) {
      if (todo.empty()) return OpenedParent{std::move(stack_.back()), L""};
      last = std::move(todo.back().name);
      todo.pop_back();
    }

    int links = 0;
    while (!todo.empty()) {
      Step step = std::move(todo.front());
      todo.pop_front();
      if (step.name == L".") continue;
      if (step.name == L"..") {
        if (stack_.size() == 1) return Escape("a link's '..' climbs above its allowed root");
        stack_.pop_back();
        continue;
      }

      CSI_PROXY_ASSIGN_OR_RETURN(UniqueHandle handle, OpenComponent(step));
      CSI_PROXY_ASSIGN_OR_RETURN(EntryInfo info, ReadEntryInfo(handle.get(), path_.path));
      if (info.reparse && info.reparse->kind != ReparsePoint::Kind::kOther) {
        if (++links > kMaxLinks) return FailedPrecondition(Describe("resolving") + ": too many links");
        const ReparsePoint& point = *info.reparse;
        if (point.kind == ReparsePoint::Kind::kVolumeMountPoint) {
          CSI_PROXY_ASSIGN_OR_RETURN(UniqueHandle volume, EnterVolume(point, step.name));
          if (todo.empty() && mode_ != WalkMode::kParent) return OpenedParent{std::move(volume), L""};
          stack_.push_back(std::move(volume));
          continue;
        }
        CSI_PROXY_RETURN_IF_ERROR(QueueLinkTarget(point, todo));
        continue;
      }
      if (info.reparse && info.reparse->names_another_object()) {
        return Escape("through a reparse point of a kind that is not followed");
      }
      CSI_PROXY_RETURN_IF_ERROR(CheckDirectlyInside(stack_.back().get(), handle.get(), policy_, field_, path_.path));

      if (todo.empty() && mode_ != WalkMode::kParent) {
        if (mode_ == WalkMode::kCreateDirs && !info.is_directory()) {
          return FailedPrecondition(field_ + " " + QuotePath(path_.path) + " exists and is not a directory");
        }
        return OpenedParent{std::move(handle), L""};
      }
      if (!info.is_directory()) {
        if (mode_ == WalkMode::kCreateDirs) {
          return FailedPrecondition("cannot create " + field_ + " " + QuotePath(path_.path) +
                                    ": a component on the way is not a directory");
        }
        return NotFound(field_ + " " + QuotePath(path_.path) + " does not exist (a component is not a directory)");
      }
      stack_.push_back(std::move(handle));
    }
    return OpenedParent{std::move(stack_.back()), std::move(last)};
  }

 private:
  // Opens one component below stack_.back() without following it, creating it first in kCreateDirs.
  StatusOr<UniqueHandle> OpenComponent(const Step& step) {
    constexpr ACCESS_MASK kAccess = FILE_READ_ATTRIBUTES | FILE_LIST_DIRECTORY | SYNCHRONIZE;
    UniqueHandle out;
    NTSTATUS status;
    if (mode_ == WalkMode::kCreateDirs && !step.from_link) {
      status = OpenBelow(stack_.back().get(), step.name, kAccess, FILE_DIRECTORY_FILE, out, FILE_OPEN_IF);
      // An existing file in the way: opened as what it is, and refused as "not a directory" by the caller.
      if (status == kStatusNotADirectory) status = OpenBelow(stack_.back().get(), step.name, kAccess, 0, out);
    } else {
      status = OpenBelow(stack_.back().get(), step.name, kAccess, 0, out);
    }
    if (status >= 0) return out;
    if (status == kStatusObjectNameNotFound || status == kStatusObjectPathNotFound || status == kStatusNotADirectory ||
        status == kStatusDeletePending) {
      return Missing();
    }
    if (status == kStatusObjectNameInvalid) {
      return InvalidArgument(field_ + " " + QuotePath(path_.path) + " has a name the file system refuses");
    }
    return NtStatusToStatus(status, Describe(mode_ == WalkMode::kCreateDirs ? "creating" : "resolving"));
  }

  // A volume mount point met on the way: the volume's root, when the mount manager put it here.
  StatusOr<UniqueHandle> EnterVolume(const ReparsePoint& point, const std::wstring& name) {
    CSI_PROXY_ASSIGN_OR_RETURN(std::wstring here, DosPathOf(stack_.back().get(), name));
    const std::wstring volume = ToWide(point.target);
    if (!MountManagerListsMountPoint(volume, here + L"\\")) {
      return Escape("through a junction to a volume that is not mounted there");
    }
    HANDLE h = ::CreateFileW(volume.c_str(), FILE_READ_ATTRIBUTES | FILE_LIST_DIRECTORY | SYNCHRONIZE,
                             FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr, OPEN_EXISTING,
                             FILE_FLAG_BACKUP_SEMANTICS, nullptr);
    if (h == INVALID_HANDLE_VALUE) return Win32Status(::GetLastError(), Describe("entering the volume mounted on"));
    return UniqueHandle(h);
  }

  // A symlink's or junction's target, queued in place of the link (as the Linux walker does with a link's text).
  Status QueueLinkTarget(const ReparsePoint& point, std::deque<Step>& todo) {
    const std::string target = WideToUtf8(ToWide(point.target));
    std::vector<std::string> parts;
    if (point.relative) {
      if (target.empty() || target.front() == '\\' || target.front() == '/') {
        return Escape("through a symlink relative to the root of a drive");
      }
      parts = policy_.Split(target);
    } else {
      std::optional<RootedText> rooted = policy_.SplitAtRoot(target, access_ == Access::kExamine);
      if (!rooted) return Escape("through a link that points outside them");
      CSI_PROXY_ASSIGN_OR_RETURN(auto new_root, OpenRootDir(rooted->root));
      stack_.clear();
      stack_.push_back(std::move(new_root));
      parts = std::move(rooted->rest);
    }
    for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
      // A ':' would name a stream, or a drive for a "C:x" target: nothing a link inside the roots needs.
      if (it->find(':') != std::string::npos) return Escape("through a link whose target names a drive or a stream");
      CSI_PROXY_ASSIGN_OR_RETURN(std::wstring wide, Utf8ToWide(*it));
      todo.push_front({std::move(wide), true});
    }
    return Status::Ok();
  }

  std::string Describe(const char* action) const {
    return std::string(action) + " " + field_ + " " + QuotePath(path_.path);
  }
  Status Missing() const { return NotFound(field_ + " " + QuotePath(path_.path) + " does not exist"); }
  Status Escape(const char* how) const { return policy_.EscapeError(field_, path_.path, how); }

  const PathPolicy& policy_;
  const ConfinedPath& path_;
  const std::string field_;
  const WalkMode mode_;
  const Access access_;
  std::vector<UniqueHandle> stack_;  // stack_[0] is the current root; each entry a directory below the previous
};

}  // namespace

NTSTATUS OpenBelow(HANDLE dir, std::wstring_view name, ACCESS_MASK access, ULONG options, UniqueHandle& out,
                   ULONG disposition, ULONG share) {
  UNICODE_STRING unicode;
  unicode.Buffer = const_cast<wchar_t*>(name.data());
  unicode.Length = unicode.MaximumLength = static_cast<USHORT>(name.size() * sizeof(wchar_t));
  OBJECT_ATTRIBUTES attributes;
  InitializeObjectAttributes(&attributes, &unicode, OBJ_CASE_INSENSITIVE, dir, nullptr);
  IO_STATUS_BLOCK io{};
  HANDLE h = nullptr;
  NTSTATUS status = ::NtCreateFile(
      &h, access | SYNCHRONIZE, &attributes, &io, nullptr, FILE_ATTRIBUTE_NORMAL, share, disposition,
      options | FILE_OPEN_REPARSE_POINT | FILE_SYNCHRONOUS_IO_NONALERT | FILE_OPEN_FOR_BACKUP_INTENT, nullptr, 0);
  if (status >= 0) out.Reset(h);
  return status;
}

StatusOr<EntryInfo> ReadEntryInfo(HANDLE handle, const std::string& shown) {
  FILE_ATTRIBUTE_TAG_INFO tag{};
  if (!::GetFileInformationByHandleEx(handle, FileAttributeTagInfo, &tag, sizeof tag)) {
    return Win32Status(::GetLastError(), "examining " + QuotePath(shown));
  }
  EntryInfo info;
  info.attributes = tag.FileAttributes;
  if ((tag.FileAttributes & FILE_ATTRIBUTE_REPARSE_POINT) == 0) return info;
  std::vector<uint8_t> data(MAXIMUM_REPARSE_DATA_BUFFER_SIZE);
  DWORD size = 0;
  if (!::DeviceIoControl(handle, FSCTL_GET_REPARSE_POINT, nullptr, 0, data.data(), static_cast<DWORD>(data.size()),
                         &size, nullptr)) {
    return Win32Status(::GetLastError(), "reading the reparse point " + QuotePath(shown));
  }
  info.reparse = ParseReparsePoint(std::span<const uint8_t>(data.data(), size));
  if (!info.reparse) return Internal("the reparse point " + QuotePath(shown) + " holds malformed data");
  return info;
}

StatusOr<std::wstring> FinalPath(HANDLE handle) {
  std::wstring path(512, L'\0');
  for (;;) {
    DWORD n = ::GetFinalPathNameByHandleW(handle, path.data(), static_cast<DWORD>(path.size()),
                                          FILE_NAME_NORMALIZED | VOLUME_NAME_NT);
    if (n == 0) return Win32Status(::GetLastError(), "reading the final path of an open file");
    if (n < path.size()) {
      path.resize(n);
      return path;
    }
    path.resize(n + 1);
  }
}

Status CheckDirectlyInside(HANDLE parent, HANDLE child, const PathPolicy& policy, std::string_view field,
                           const std::string& path) {
  CSI_PROXY_ASSIGN_OR_RETURN(std::wstring above, FinalPath(parent));
  CSI_PROXY_ASSIGN_OR_RETURN(std::wstring here, FinalPath(child));
  while (!above.empty() && above.back() == L'\\') above.pop_back();  // a volume's root ends with one
  const size_t cut = here.rfind(L'\\');
  if (cut != std::wstring::npos && EqualIgnoringCase(std::wstring_view(here).substr(0, cut), above)) {
    return Status::Ok();
  }
  return policy.EscapeError(field, path, "the system resolved it through a link it followed by itself");
}

StatusOr<UniqueHandle> PinDirectory(HANDLE dir, const std::string& shown) {
  UniqueHandle pinned;
  NTSTATUS status = OpenBelow(dir, L"", FILE_READ_ATTRIBUTES | FILE_LIST_DIRECTORY, FILE_DIRECTORY_FILE, pinned,
                              FILE_OPEN, FILE_SHARE_READ | FILE_SHARE_WRITE);
  if (status < 0) return NtStatusToStatus(status, "opening the directory of " + QuotePath(shown));
  return pinned;
}

StatusOr<std::wstring> DosPathOf(HANDLE dir, std::wstring_view name) {
  std::wstring path(512, L'\0');
  for (;;) {
    DWORD n = ::GetFinalPathNameByHandleW(dir, path.data(), static_cast<DWORD>(path.size()),
                                          FILE_NAME_NORMALIZED | VOLUME_NAME_DOS);
    if (n == 0) return Win32Status(::GetLastError(), "reading the path of an open directory");
    if (n < path.size()) {
      path.resize(n);
      break;
    }
    path.resize(n + 1);
  }
  // "\\?\C:\..." as "C:\...", the form the mount manager lists.
  if (path.size() >= 6 && path.compare(0, 4, L"\\\\?\\") == 0 && path[5] == L':') path.erase(0, 4);
  if (!path.empty() && path.back() != L'\\') path += L'\\';
  return path + std::wstring(name);
}

StatusOr<OpenedParent> OpenParent(const PathPolicy& policy, const ConfinedPath& path, std::string_view field,
                                  Access access) {
  return Walker(policy, path, field, WalkMode::kParent, access).Run();
}

StatusOr<UniqueHandle> OpenFollowing(const PathPolicy& policy, const ConfinedPath& path, std::string_view field,
                                     Access access) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto r, Walker(policy, path, field, WalkMode::kFollow, access).Run());
  return std::move(r.dir);
}

StatusOr<UniqueHandle> OpenCreatingDirs(const PathPolicy& policy, const ConfinedPath& path, std::string_view field) {
  // A directory removed by someone else between creating it and the next step shows up as NOT_FOUND; walking
  // again from the root converges, as on Linux.
  for (int attempt = 0;; ++attempt) {
    auto r = Walker(policy, path, field, WalkMode::kCreateDirs, Access::kModify).Run();
    if (r.ok()) return std::move(r->dir);
    if (r.status().code() != Code::kNotFound || attempt == 3) return r.status();
  }
}

}  // namespace csi_proxy::common

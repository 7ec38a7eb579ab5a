// The lexical half of the allowed-roots rule; see path_policy.h.
#include "path_policy.h"

#include <algorithm>
#include <array>
#include <iterator>

#include "text.h"

namespace csi_proxy::common {
namespace {

// Linux limits: PATH_MAX counts the terminating NUL, NAME_MAX does not. Checked here so an overlong request
// gets a clear INVALID_ARGUMENT instead of ENAMETOOLONG from somewhere deep. Windows paths get the same limits
// in UTF-8 bytes, which stay within NTFS's 255 UTF-16 units per name.
constexpr size_t kMaxPathBytes = 4095;
constexpr size_t kMaxNameBytes = 255;

char Separator(PathSyntax syntax) { return syntax == PathSyntax::kWindows ? '\\' : '/'; }

bool IsSeparator(char c, PathSyntax syntax) { return c == '/' || (syntax == PathSyntax::kWindows && c == '\\'); }

std::string Join(const std::vector<std::string>& parts, size_t from, size_t to, char separator = '/') {
  std::string out;
  for (size_t i = from; i < to; ++i) {
    if (!out.empty()) out += separator;
    out += parts[i];
  }
  return out;
}

bool IsAsciiLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// `X:\` or `X:/`: the only absolute form of a Windows request path.
bool HasDrivePrefix(std::string_view path) {
  return path.size() >= 3 && IsAsciiLetter(path[0]) && path[1] == ':' && (path[2] == '\\' || path[2] == '/');
}

// The components of an absolute path: for Windows the first one is the drive ("C:", upper case). nullopt when
// the path is not absolute in `syntax` (or holds a NUL byte).
std::optional<std::vector<std::string>> AbsoluteParts(std::string_view path, PathSyntax syntax) {
  if (path.find('\0') != std::string_view::npos) return std::nullopt;
  if (syntax == PathSyntax::kPosix) {
    if (path.empty() || path.front() != '/') return std::nullopt;
    return SplitPath(path);
  }
  if (!HasDrivePrefix(path)) return std::nullopt;
  std::vector<std::string> parts{std::string{static_cast<char>(path[0] & ~0x20), ':'}};
  for (auto& part : SplitPath(path.substr(3), syntax)) parts.push_back(std::move(part));
  return parts;
}

// The normalized text of absolute components.
std::string JoinAbsolute(const std::vector<std::string>& parts, PathSyntax syntax) {
  if (syntax == PathSyntax::kPosix) return "/" + Join(parts, 0, parts.size());
  return parts.front() + "\\" + Join(parts, 1, parts.size(), '\\');
}

bool SameComponent(std::string_view a, std::string_view b, PathSyntax syntax) {
  if (syntax == PathSyntax::kPosix) return a == b;
  return a.size() == b.size() && AsciiLower(std::string(a)) == AsciiLower(std::string(b));
}

// Names Win32 maps to devices in every directory, with or without an extension ("nul.txt").
bool IsDosDeviceName(std::string_view name) {
  static constexpr std::array<std::string_view, 6> kPlain = {"con", "prn", "aux", "nul", "conin$", "conout$"};
  std::string stem = AsciiLower(std::string(name.substr(0, name.find('.'))));
  while (!stem.empty() && stem.back() == ' ') stem.pop_back();
  if (std::find(kPlain.begin(), kPlain.end(), stem) != kPlain.end()) return true;
  // COM0-9 and LPT0-9, and the superscript digits ¹²³ Win32 accepts there too.
  if (stem.size() < 4 || (stem.compare(0, 3, "com") != 0 && stem.compare(0, 3, "lpt") != 0)) return false;
  std::string_view digit = std::string_view(stem).substr(3);
  return (digit.size() == 1 && digit[0] >= '0' && digit[0] <= '9') || digit == "\xc2\xb9" || digit == "\xc2\xb2" ||
         digit == "\xc2\xb3";
}

// Why a Windows component cannot be used as it is written, or "" when it can. The file system would take some
// of these literally while Win32 (and so the kubelet) reads them differently: a ':' names an alternate data
// stream, a trailing dot or space is stripped, a device name opens the device.
std::string WindowsComponentProblem(std::string_view name) {
  for (unsigned char c : name) {
    if (c < 0x20) return "a control character";
    if (c == ':' || c == '<' || c == '>' || c == '"' || c == '|' || c == '?' || c == '*') {
      return std::string("the character '") + static_cast<char>(c) + "'";
    }
  }
  if (name.back() == '.' || name.back() == ' ') return "a component ending with '.' or ' '";
  if (IsDosDeviceName(name)) return "a DOS device name";
  return "";
}

std::string AbsoluteForm(PathSyntax syntax) {
  return syntax == PathSyntax::kWindows ? "an absolute path with a drive letter (C:\\...)" : "an absolute path";
}

}  // namespace

std::vector<std::string> SplitPath(std::string_view path) { return SplitPath(path, PathSyntax::kPosix); }

std::vector<std::string> SplitPath(std::string_view path, PathSyntax syntax) {
  std::vector<std::string> parts;
  size_t i = 0;
  while (i < path.size()) {
    size_t j = i;
    while (j < path.size() && !IsSeparator(path[j], syntax)) ++j;
    if (j > i) parts.emplace_back(path.substr(i, j - i));
    i = j + 1;
  }
  return parts;
}

std::vector<std::string> PathPolicy::Split(std::string_view path) const { return SplitPath(path, syntax_); }

std::string PathPolicy::SameObjectKey(const ConfinedPath& path) const {
  return syntax_ == PathSyntax::kWindows ? AsciiLower(path.path) : path.path;
}

Status PathPolicy::Add(std::string_view dir, bool link_target_only, const char* kind) {
  if (dir.empty()) return Status::Ok();
  std::optional<std::vector<std::string>> raw = AbsoluteParts(dir, syntax_);
  if (!raw) return InvalidArgument(std::string(kind) + " " + QuotePath(dir) + " must be " + AbsoluteForm(syntax_));
  std::vector<std::string> parts;
  for (auto& part : *raw) {
    if (part == "..") return InvalidArgument(std::string(kind) + " " + QuotePath(dir) + " must not contain '..'");
    if (part != ".") parts.push_back(std::move(part));
  }
  const size_t prefix = syntax_ == PathSyntax::kWindows ? 1 : 0;  // the drive
  if (parts.size() == prefix) {
    const std::string whole = syntax_ == PathSyntax::kWindows ? "the root of a drive" : "\"/\"";
    return InvalidArgument("refusing " + whole + " as " + std::string(kind) + ": it would allow every path" +
                           (syntax_ == PathSyntax::kWindows ? " on it" : ""));
  }
  std::string normalized = JoinAbsolute(parts, syntax_);
  for (const Dir& d : dirs_) {
    // A duplicate, or a link target that is also a root.
    if (d.parts.size() == parts.size() &&
        std::equal(d.parts.begin(), d.parts.end(), parts.begin(),
                   [this](const std::string& a, const std::string& b) { return SameComponent(a, b, syntax_); })) {
      return Status::Ok();
    }
  }
  dirs_.push_back({std::move(normalized), std::move(parts), link_target_only});
  return Status::Ok();
}

StatusOr<PathPolicy> PathPolicy::Create(std::string_view kubelet_path, const std::vector<std::string>& working_dirs,
                                        const std::vector<std::string>& link_target_dirs, PathSyntax syntax) {
  PathPolicy policy;
  policy.syntax_ = syntax;
  CSI_PROXY_RETURN_IF_ERROR(policy.Add(kubelet_path, false, "an allowed root"));
  for (const auto& dir : working_dirs) CSI_PROXY_RETURN_IF_ERROR(policy.Add(dir, false, "an allowed root"));
  for (const auto& dir : link_target_dirs) CSI_PROXY_RETURN_IF_ERROR(policy.Add(dir, true, "a link target dir"));
  return policy;
}

std::vector<std::string> PathPolicy::roots() const {
  std::vector<std::string> out;
  for (const Dir& d : dirs_) {
    if (!d.link_target_only) out.push_back(d.path);
  }
  return out;
}

std::vector<std::string> PathPolicy::link_target_dirs() const {
  std::vector<std::string> out;
  for (const Dir& d : dirs_) {
    if (d.link_target_only) out.push_back(d.path);
  }
  return out;
}

std::string PathPolicy::RootsForMessage() const {
  std::string out;
  for (const std::string& root : roots()) out += (out.empty() ? "" : ", ") + root;
  return "[" + out + "]";
}

Status PathPolicy::EscapeError(std::string_view field, std::string_view path, std::string_view how) const {
  return PermissionDenied(std::string(field) + " " + QuotePath(path) + " leads outside the allowed roots " +
                          RootsForMessage() + " (" + std::string(how) + ")");
}

const PathPolicy::Dir* PathPolicy::LongestDirOf(const std::vector<std::string>& parts,
                                                bool include_link_targets) const {
  const Dir* best = nullptr;
  for (const Dir& d : dirs_) {
    if (d.link_target_only && !include_link_targets) continue;
    bool is_prefix = d.parts.size() <= parts.size() && std::equal(d.parts.begin(), d.parts.end(), parts.begin(),
                                                                  [this](const std::string& a, const std::string& b) {
                                                                    return SameComponent(a, b, syntax_);
                                                                  });
    if (is_prefix && (best == nullptr || d.parts.size() > best->parts.size())) best = &d;
  }
  return best;
}

std::optional<RootedText> PathPolicy::SplitAtRoot(std::string_view absolute, bool include_link_targets) const {
  std::optional<std::vector<std::string>> parts = AbsoluteParts(absolute, syntax_);
  if (!parts) return std::nullopt;
  const Dir* dir = LongestDirOf(*parts, include_link_targets);
  if (dir == nullptr) return std::nullopt;
  auto rest_begin = parts->begin() + static_cast<ptrdiff_t>(dir->parts.size());
  return RootedText{
      dir->path, std::vector<std::string>(std::make_move_iterator(rest_begin), std::make_move_iterator(parts->end()))};
}

StatusOr<ConfinedPath> PathPolicy::Confine(std::string_view path, std::string_view field) const {
  const std::string f(field);
  if (path.empty()) return InvalidArgument(f + " is empty");
  if (path.find('\0') != std::string_view::npos) {
    return InvalidArgument(f + " " + QuotePath(path) + " contains a NUL byte");
  }
  std::optional<std::vector<std::string>> raw = AbsoluteParts(path, syntax_);
  if (!raw) return InvalidArgument(f + " " + QuotePath(path) + " is not " + AbsoluteForm(syntax_));

  std::vector<std::string> parts;
  for (auto& part : *raw) {
    if (part == "..") return InvalidArgument(f + " " + QuotePath(path) + " contains a '..' component");
    if (part == ".") continue;
    if (part.size() > kMaxNameBytes) {
      return InvalidArgument(f + " " + QuotePath(path) + " has a component longer than 255 bytes");
    }
    if (syntax_ == PathSyntax::kWindows && !parts.empty()) {
      if (std::string problem = WindowsComponentProblem(part); !problem.empty()) {
        return InvalidArgument(f + " " + QuotePath(path) + " has " + problem + " in " + QuotePath(part));
      }
    }
    parts.push_back(std::move(part));
  }
  ConfinedPath out;
  out.path = JoinAbsolute(parts, syntax_);
  if (out.path.size() > kMaxPathBytes) return InvalidArgument(f + " is longer than 4095 bytes");

  const Dir* root = LongestDirOf(parts, /*include_link_targets=*/false);
  if (root == nullptr) {
    return PermissionDenied(f + " " + QuotePath(path) + " is not under an allowed root (the kubelet path or a " +
                            "working dir): allowed roots are " + RootsForMessage());
  }
  out.root = root->path;
  out.relative = Join(parts, root->parts.size(), parts.size(), Separator(syntax_));
  return out;
}

}  // namespace csi_proxy::common

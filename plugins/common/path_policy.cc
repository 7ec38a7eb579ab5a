// The lexical half of the allowed-roots rule; see path_policy.h.
#include "path_policy.h"

#include <algorithm>
#include <iterator>

#include "text.h"

namespace csi_proxy::common {
namespace {

// Linux limits: PATH_MAX counts the terminating NUL, NAME_MAX does not. Checked here so an overlong request
// gets a clear INVALID_ARGUMENT instead of ENAMETOOLONG from somewhere deep.
constexpr size_t kMaxPathBytes = 4095;
constexpr size_t kMaxNameBytes = 255;

std::string Join(const std::vector<std::string>& parts, size_t from, size_t to) {
  std::string out;
  for (size_t i = from; i < to; ++i) {
    if (!out.empty()) out += '/';
    out += parts[i];
  }
  return out;
}

}  // namespace

std::vector<std::string> SplitPath(std::string_view path) {
  std::vector<std::string> parts;
  size_t i = 0;
  while (i < path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    if (j > i) parts.emplace_back(path.substr(i, j - i));
    i = j + 1;
  }
  return parts;
}

Status PathPolicy::Add(std::string_view dir, bool link_target_only, const char* kind) {
  if (dir.empty()) return Status::Ok();
  if (dir.find('\0') != std::string_view::npos || dir.front() != '/') {
    return InvalidArgument(std::string(kind) + " " + QuotePath(dir) + " must be an absolute path");
  }
  std::vector<std::string> parts;
  for (auto& part : SplitPath(dir)) {
    if (part == "..") return InvalidArgument(std::string(kind) + " " + QuotePath(dir) + " must not contain '..'");
    if (part != ".") parts.push_back(std::move(part));
  }
  if (parts.empty()) {
    return InvalidArgument("refusing \"/\" as " + std::string(kind) + ": it would allow every path");
  }
  std::string normalized = "/" + Join(parts, 0, parts.size());
  for (const Dir& d : dirs_) {
    if (d.path == normalized) return Status::Ok();  // a duplicate, or a link target that is also a root
  }
  dirs_.push_back({std::move(normalized), std::move(parts), link_target_only});
  return Status::Ok();
}

StatusOr<PathPolicy> PathPolicy::Create(std::string_view kubelet_path, const std::vector<std::string>& working_dirs,
                                        const std::vector<std::string>& link_target_dirs) {
  PathPolicy policy;
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
    bool is_prefix = d.parts.size() <= parts.size() && std::equal(d.parts.begin(), d.parts.end(), parts.begin());
    if (is_prefix && (best == nullptr || d.parts.size() > best->parts.size())) best = &d;
  }
  return best;
}

std::optional<RootedText> PathPolicy::SplitAtRoot(std::string_view absolute, bool include_link_targets) const {
  if (absolute.empty() || absolute.front() != '/') return std::nullopt;
  std::vector<std::string> parts = SplitPath(absolute);
  const Dir* dir = LongestDirOf(parts, include_link_targets);
  if (dir == nullptr) return std::nullopt;
  auto rest_begin = parts.begin() + static_cast<ptrdiff_t>(dir->parts.size());
  return RootedText{
      dir->path, std::vector<std::string>(std::make_move_iterator(rest_begin), std::make_move_iterator(parts.end()))};
}

StatusOr<ConfinedPath> PathPolicy::Confine(std::string_view path, std::string_view field) const {
  const std::string f(field);
  if (path.empty()) return InvalidArgument(f + " is empty");
  if (path.find('\0') != std::string_view::npos) {
    return InvalidArgument(f + " " + QuotePath(path) + " contains a NUL byte");
  }
  if (path.front() != '/') return InvalidArgument(f + " " + QuotePath(path) + " is not an absolute path");

  std::vector<std::string> parts;
  for (auto& part : SplitPath(path)) {
    if (part == "..") return InvalidArgument(f + " " + QuotePath(path) + " contains a '..' component");
    if (part == ".") continue;
    if (part.size() > kMaxNameBytes) {
      return InvalidArgument(f + " " + QuotePath(path) + " has a component longer than 255 bytes");
    }
    parts.push_back(std::move(part));
  }
  ConfinedPath out;
  out.path = "/" + Join(parts, 0, parts.size());
  if (out.path.size() > kMaxPathBytes) return InvalidArgument(f + " is longer than 4095 bytes");

  const Dir* root = LongestDirOf(parts, /*include_link_targets=*/false);
  if (root == nullptr) {
    return PermissionDenied(f + " " + QuotePath(path) + " is not under an allowed root (the kubelet path or a " +
                            "working dir): allowed roots are " + RootsForMessage());
  }
  out.root = root->path;
  out.relative = Join(parts, root->parts.size(), parts.size());
  return out;
}

}  // namespace csi_proxy::common

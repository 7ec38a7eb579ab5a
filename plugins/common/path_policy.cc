// The lexical half of the allowed-roots rule; see path_policy.h.
#include "path_policy.h"

#include <algorithm>
#include <cstdio>
#include <iterator>

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

std::string QuotePath(std::string_view path) {
  std::string out = "\"";
  for (unsigned char c : path) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
  return out;
}

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

StatusOr<PathPolicy> PathPolicy::Create(std::string_view kubelet_path, const std::vector<std::string>& working_dirs) {
  std::vector<std::string_view> candidates{kubelet_path};
  candidates.insert(candidates.end(), working_dirs.begin(), working_dirs.end());
  PathPolicy policy;
  for (std::string_view root : candidates) {
    if (root.empty()) continue;
    if (root.find('\0') != std::string_view::npos || root.front() != '/') {
      return InvalidArgument("allowed root " + QuotePath(root) + " must be an absolute path");
    }
    std::vector<std::string> parts;
    for (auto& part : SplitPath(root)) {
      if (part == "..") return InvalidArgument("allowed root " + QuotePath(root) + " must not contain '..'");
      if (part != ".") parts.push_back(std::move(part));
    }
    if (parts.empty()) return InvalidArgument("refusing \"/\" as an allowed root: it would allow every path");
    std::string normalized = "/" + Join(parts, 0, parts.size());
    if (std::find(policy.roots_.begin(), policy.roots_.end(), normalized) == policy.roots_.end()) {
      policy.roots_.push_back(std::move(normalized));
      policy.root_parts_.push_back(std::move(parts));
    }
  }
  return policy;
}

std::string PathPolicy::RootsForMessage() const {
  std::string out = "[";
  for (size_t i = 0; i < roots_.size(); ++i) {
    if (i > 0) out += ", ";
    out += roots_[i];
  }
  return out + "]";
}

Status PathPolicy::EscapeError(std::string_view field, std::string_view path, std::string_view how) const {
  return PermissionDenied(std::string(field) + " " + QuotePath(path) + " leads outside the allowed roots " +
                          RootsForMessage() + " (" + std::string(how) + ")");
}

std::optional<size_t> PathPolicy::LongestRootOf(const std::vector<std::string>& parts) const {
  std::optional<size_t> best;
  for (size_t i = 0; i < root_parts_.size(); ++i) {
    const std::vector<std::string>& root = root_parts_[i];
    bool is_prefix = root.size() <= parts.size() && std::equal(root.begin(), root.end(), parts.begin());
    if (is_prefix && (!best || root.size() > root_parts_[*best].size())) best = i;
  }
  return best;
}

std::optional<RootedText> PathPolicy::SplitAtRoot(std::string_view absolute) const {
  if (absolute.empty() || absolute.front() != '/') return std::nullopt;
  std::vector<std::string> parts = SplitPath(absolute);
  std::optional<size_t> root = LongestRootOf(parts);
  if (!root) return std::nullopt;
  auto rest_begin = parts.begin() + static_cast<ptrdiff_t>(root_parts_[*root].size());
  return RootedText{roots_[*root], std::vector<std::string>(std::make_move_iterator(rest_begin),
                                                            std::make_move_iterator(parts.end()))};
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

  std::optional<size_t> root = LongestRootOf(parts);
  if (!root) {
    return PermissionDenied(f + " " + QuotePath(path) + " is not under an allowed root (the kubelet path or a " +
                            "working dir): allowed roots are " + RootsForMessage());
  }
  out.root = roots_[*root];
  out.relative = Join(parts, root_parts_[*root].size(), parts.size());
  return out;
}

}  // namespace csi_proxy::common

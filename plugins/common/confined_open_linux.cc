// The component-by-component walk beneath the allowed roots; see confined_open_linux.h.
#include "confined_open_linux.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <deque>
#include <vector>

#include "errno_linux.h"
#include "text.h"

namespace csi_proxy::common {

int Openat2(int dirfd, const char* path, int flags, uint64_t resolve, mode_t mode) {
  struct open_how how;
  std::memset(&how, 0, sizeof how);
  how.flags = static_cast<uint64_t>(flags) | O_CLOEXEC;
  how.mode = mode;
  how.resolve = resolve;
  for (int attempt = 0;; ++attempt) {
    long fd = ::syscall(SYS_openat2, dirfd, path, &how, sizeof how);
    if (fd >= 0) return static_cast<int>(fd);
    int err = errno;
    if ((err == EINTR || err == EAGAIN) && attempt < 64) continue;
    return -err;
  }
}

namespace {

// Links followed before giving up, as the kernel's own limit.
constexpr int kMaxSymlinks = 40;

enum class WalkMode { kParent, kFollow, kCreateDirs };

struct Step {
  std::string name;
  bool from_link;  // came from a symlink's text: never created by kCreateDirs
};

StatusOr<UniqueFd> OpenRootDir(const std::string& root) {
  // The roots come from the admin's configuration and are trusted, symlinks in them included.
  int fd = ::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT || err == ENOTDIR) return NotFound("allowed root " + QuotePath(root) + " does not exist");
    return ErrnoStatus(err, "opening allowed root " + QuotePath(root));
  }
  return UniqueFd(fd);
}

StatusOr<std::string> ReadLinkFd(int fd) {
  std::string text(PATH_MAX, '\0');
  ssize_t n = ::readlinkat(fd, "", text.data(), text.size());
  if (n < 0) return ErrnoStatus(errno, "reading a symlink");
  text.resize(static_cast<size_t>(n));
  return text;
}

// One walk. kParent returns the directory holding the last component (and its name); the other modes return
// the object itself.
class Walker {
 public:
  Walker(const PathPolicy& policy, const ConfinedPath& path, std::string_view field, WalkMode mode, Access access)
      : policy_(policy), path_(path), field_(field), mode_(mode), access_(access) {}

  StatusOr<OpenedParent> Run() {
    CSI_PROXY_ASSIGN_OR_RETURN(auto root, OpenRootDir(path_.root));
    stack_.push_back(std::move(root));

    std::deque<Step> todo;
    for (auto& part : SplitPath(path_.relative)) todo.push_back({std::move(part), false});
    std::string last;
    if (mode_ == WalkMode::kParent) {
      if (todo.empty()) return OpenedParent{std::move(stack_.back()), ""};
      last = std::move(todo.back().name);
      todo.pop_back();
    }

    int links = 0;
    while (!todo.empty()) {
      Step step = std::move(todo.front());
      todo.pop_front();
      if (step.name == ".") continue;
      if (step.name == "..") {
        if (stack_.size() == 1) return Escape("a symlink's '..' climbs above its allowed root");
        stack_.pop_back();
        continue;
      }

      CSI_PROXY_ASSIGN_OR_RETURN(UniqueFd fd, OpenComponent(step));
      struct stat st;
      if (::fstat(fd.get(), &st) != 0) return ErrnoStatus(errno, Describe("examining"));

      if (S_ISLNK(st.st_mode)) {
        if (++links > kMaxSymlinks) return FailedPrecondition(Describe("resolving") + ": too many symbolic links");
        auto text = ReadLinkFd(fd.get());
        if (!text.ok()) return text.status().WithContext(Describe("resolving"));
        if (text->empty()) return Missing();
        std::vector<std::string> parts;
        if (text->front() == '/') {
          std::optional<RootedText> rooted = policy_.SplitAtRoot(*text, access_ == Access::kExamine);
          if (!rooted) return Escape("through a symlink that points outside them");
          CSI_PROXY_ASSIGN_OR_RETURN(auto new_root, OpenRootDir(rooted->root));
          stack_.clear();
          stack_.push_back(std::move(new_root));
          parts = std::move(rooted->rest);
        } else {
          parts = SplitPath(*text);  // relative to the directory holding the link: stack_.back()
        }
        for (auto it = parts.rbegin(); it != parts.rend(); ++it) todo.push_front({std::move(*it), true});
        continue;
      }

      if (todo.empty() && mode_ != WalkMode::kParent) {
        if (mode_ == WalkMode::kCreateDirs && !S_ISDIR(st.st_mode)) {
          return FailedPrecondition(field_ + " " + QuotePath(path_.path) + " exists and is not a directory");
        }
        return OpenedParent{std::move(fd), ""};
      }
      if (!S_ISDIR(st.st_mode)) {
        if (mode_ == WalkMode::kCreateDirs) {
          return FailedPrecondition("cannot create " + field_ + " " + QuotePath(path_.path) +
                                    ": a component on the way is not a directory");
        }
        return NotFound(field_ + " " + QuotePath(path_.path) + " does not exist (a component is not a directory)");
      }
      stack_.push_back(std::move(fd));
    }
    // The walk ended on a directory already on the stack (the root, or after "." / ".." from a link's text).
    return OpenedParent{std::move(stack_.back()), std::move(last)};
  }

 private:
  // Opens one component below stack_.back() without following it, creating it first in kCreateDirs.
  StatusOr<UniqueFd> OpenComponent(const Step& step) {
    constexpr uint64_t kResolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    int dir = stack_.back().get();
    int fd = Openat2(dir, step.name.c_str(), O_PATH | O_NOFOLLOW, kResolve);
    if (fd == -ENOENT && mode_ == WalkMode::kCreateDirs && !step.from_link) {
      if (::mkdirat(dir, step.name.c_str(), 0755) != 0 && errno != EEXIST) {
        return ErrnoStatus(errno, "creating " + field_ + " " + QuotePath(path_.path));
      }
      fd = Openat2(dir, step.name.c_str(), O_PATH | O_NOFOLLOW, kResolve);
    }
    if (fd >= 0) return UniqueFd(fd);
    switch (-fd) {
      case ENOENT:
      case ENOTDIR:
        return Missing();
      case EXDEV:
      case ELOOP:
        return Escape("the kernel refused to resolve it beneath the root");
      default:
        return ErrnoStatus(-fd, Describe("resolving"));
    }
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
  std::vector<UniqueFd> stack_;  // stack_[0] is the current root; each entry a directory below the previous
};

}  // namespace

StatusOr<OpenedParent> OpenParent(const PathPolicy& policy, const ConfinedPath& path, std::string_view field,
                                  Access access) {
  return Walker(policy, path, field, WalkMode::kParent, access).Run();
}

StatusOr<UniqueFd> OpenFollowing(const PathPolicy& policy, const ConfinedPath& path, std::string_view field,
                                 Access access) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto r, Walker(policy, path, field, WalkMode::kFollow, access).Run());
  return std::move(r.dir);
}

StatusOr<UniqueFd> OpenCreatingDirs(const PathPolicy& policy, const ConfinedPath& path, std::string_view field) {
  // A directory removed by someone else between our mkdirat and the next step shows up as NOT_FOUND; walking
  // again from the root converges (a missing component that cannot be created stays NOT_FOUND).
  for (int attempt = 0;; ++attempt) {
    auto r = Walker(policy, path, field, WalkMode::kCreateDirs, Access::kModify).Run();
    if (r.ok()) return std::move(r->dir);
    if (r.status().code() != Code::kNotFound || attempt == 3) return r.status();
  }
}

}  // namespace csi_proxy::common

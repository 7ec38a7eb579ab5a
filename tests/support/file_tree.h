// Real directory trees and mounts for the tests of path handling (the filesystem group, the path policy): build
// them, look at them, compare them; mounts are cleaned up also when a test fails.
#pragma once

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace csi_proxy::testing {

namespace fs = std::filesystem;

// A mount at an existing directory, unmounted on destruction. Either a tmpfs or a bind mount of `source`.
class TestMount {
 public:
  static TestMount Tmpfs(const std::string& target) {
    TestMount m(target);
    if (::mount("csi-proxy-test", target.c_str(), "tmpfs", 0, "size=4m,mode=0755") != 0) m.error_ = m.Errno("tmpfs");
    return m;
  }
  static TestMount Bind(const std::string& source, const std::string& target) {
    TestMount m(target);
    if (::mount(source.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0) m.error_ = m.Errno("bind");
    return m;
  }
  TestMount(TestMount&& other) noexcept : target_(std::move(other.target_)), error_(std::move(other.error_)) {
    other.target_.clear();
  }
  TestMount& operator=(TestMount&&) = delete;
  TestMount(const TestMount&) = delete;
  ~TestMount() {
    if (!target_.empty() && error_.empty()) ::umount2(target_.c_str(), MNT_DETACH);
  }

  bool ok() const { return error_.empty(); }
  // Why the mount failed, for GTEST_SKIP: names what is missing.
  const std::string& error() const { return error_; }

 private:
  explicit TestMount(std::string target) : target_(std::move(target)) {}
  std::string Errno(const char* kind) const {
    return std::string(kind) + " mount at " + target_ + " failed (" + std::strerror(errno) +
           "): needs root and CAP_SYS_ADMIN";
  }
  std::string target_;
  std::string error_;
};

inline void WriteFile(const std::string& path, const std::string& content) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << content;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every path below `dir` (not following links), sorted; empty when `dir` does not exist.
inline std::vector<std::string> ListTree(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec)) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

inline bool Lexists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

inline bool IsDirNoFollow(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

inline bool IsLinkNoFollow(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

// Everything under `root` (symlinks not followed, mounts entered): relative path -> type and content (a file's
// bytes, a link's text). Two equal snapshots mean nothing under `root` was created, removed or changed.
inline std::map<std::string, std::string> Snapshot(const std::string& root) {
  std::map<std::string, std::string> out;
  std::error_code ec;
  if (!Lexists(root)) return out;
  out["."] = IsLinkNoFollow(root) ? "link:" + fs::read_symlink(root, ec).string() : "dir";
  if (!IsDirNoFollow(root)) return out;
  for (auto it = fs::recursive_directory_iterator(root, fs::directory_options::none, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const fs::path& p = it->path();
    std::string rel = fs::relative(p, root, ec).string();
    auto st = fs::symlink_status(p, ec);
    if (fs::is_symlink(st)) {
      out[rel] = "link:" + fs::read_symlink(p, ec).string();
    } else if (fs::is_directory(st)) {
      out[rel] = "dir";
    } else {
      out[rel] = "file:" + ReadFile(p.string());
    }
  }
  return out;
}

}  // namespace csi_proxy::testing

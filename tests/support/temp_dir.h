// The one temporary directory of the tests: a fresh private directory under /tmp, removed with what is in it when
// the test is done, without ever deleting across a mount.
#pragma once

#include <string>

namespace csi_proxy::testing {

// mkdtemp under /tmp; throws std::runtime_error when that fails. The destructor detaches the mounts a test left
// beneath it (only ours: the directory is private and new), then removes the tree without following symlinks and
// without entering a mount that stayed.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // path()/name; nothing is created.
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }
  // Creates path()/name with its parents; returns its path.
  std::string MakeDir(const std::string& name) const;
  // Writes `content` to path()/name (parents created); returns its path.
  std::string Write(const std::string& name, const std::string& content) const;

 private:
  std::string path_;
};

}  // namespace csi_proxy::testing

// The one temporary directory of the tests and benchmarks: a fresh private directory under /tmp, removed with
// what is in it when the test or run is done (or interrupted: it is registered with cleanup.h), without ever
// deleting across a mount.
#pragma once

#include <string>

namespace csi_proxy::testing {

// mkdtemp under /tmp (/tmp/<prefix>-XXXXXX); throws std::runtime_error when that fails. The destructor detaches the
// mounts a test left beneath it (only ours: the directory is private and new), then removes the tree without following
// symlinks and without entering a mount that stayed.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "csi-proxy-test");
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
  int cleanup_slot_ = -1;
};

}  // namespace csi_proxy::testing

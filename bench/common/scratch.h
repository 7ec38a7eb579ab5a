// A private scratch directory for one benchmark program: backing files of loop devices, mount points, the
// host's configuration and sockets. Removed on destruction, after unmounting anything still mounted beneath it.
#pragma once

#include <string>

namespace csi_proxy::bench {

class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix = "csi-proxy-bench");
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }
  // Creates (with parents) and returns Sub(name).
  std::string MakeDir(const std::string& name) const;

 private:
  std::string path_;
  int cleanup_slot_ = -1;
};

// A mount made by a benchmark; unmounted on destruction (and by the signal handler).
class ScopedMount {
 public:
  ScopedMount() = default;
  ScopedMount(const std::string& target);  // registers an existing mount at `target` for cleanup
  ~ScopedMount();
  ScopedMount(ScopedMount&& other) noexcept;
  ScopedMount& operator=(ScopedMount&& other) noexcept;
  // Stops tracking (the mount was undone by someone else, e.g. the proxy's UnmountVolume).
  void Release();

 private:
  std::string target_;
  int slot_ = -1;
};

}  // namespace csi_proxy::bench

// A mount a benchmark made, undone on destruction and by the signal handler (cleanup.h). The scratch directories
// themselves are the support library's TempDir.
#pragma once

#include <string>

namespace csi_proxy::bench {

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

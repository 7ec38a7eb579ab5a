// Unmounting without detaching; see unmount_linux.h.
#include "unmount_linux.h"

#include <sys/mount.h>

#include <cerrno>
#include <chrono>
#include <thread>

namespace csi_proxy::common {

int UnmountNotLazily(const std::string& path) {
  int rc = umount2(path.c_str(), UMOUNT_NOFOLLOW);
  for (int attempt = 0; rc != 0 && errno == EBUSY && attempt < 50; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    rc = umount2(path.c_str(), UMOUNT_NOFOLLOW);
  }
  return rc == 0 ? 0 : errno;
}

}  // namespace csi_proxy::common

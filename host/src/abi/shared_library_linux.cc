// See shared_library.h: the private copy is a memfd (glibc matches loaded libraries by path and would hand back
// the one already loaded), the loader's reason is dlerror(), a file's identity is stat(2)'s.
#include "abi/shared_library.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace csi_proxy::host {

StatusOr<std::string> PrivateLoadPath(const std::string& path, intptr_t& copy) {
  void* existing = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (existing == nullptr) return path;
  dlclose(existing);
  int in = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return FailedPrecondition(std::string("cannot open the library: ") + std::strerror(errno));
  struct stat st {};
  int memfd = fstat(in, &st) == 0 ? memfd_create("csi-proxy-group-library", MFD_CLOEXEC) : -1;
  off_t copied = 0;
  while (memfd >= 0 && copied < st.st_size) {
    ssize_t n = sendfile(memfd, in, &copied, static_cast<size_t>(st.st_size - copied));
    if (n <= 0) {
      close(memfd);
      memfd = -1;
    }
  }
  int err = errno;
  close(in);
  if (memfd < 0) {
    return FailedPrecondition(std::string("cannot make a private copy of the library: ") + std::strerror(err));
  }
  copy = memfd;
  return "/proc/self/fd/" + std::to_string(memfd);
}

void ReleasePrivateCopy(intptr_t copy) {
  if (copy >= 0) close(static_cast<int>(copy));
}

std::string LastLoadError() {
  const char* detail = dlerror();
  return detail != nullptr ? detail : "";
}

std::string LibraryFileIdentity(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return {};
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
         std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
}

}  // namespace csi_proxy::host

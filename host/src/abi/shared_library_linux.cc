// See shared_library.h: the loader takes the checked open file as /proc/self/fd/N; glibc hands back a library it
// has loaded already by that name or by the file's device and inode, so a stale name gets another descriptor
// number and a file loaded already a private copy (a memfd). The loader's reason is dlerror(), a file's identity
// is stat(2)'s.
#include "abi/shared_library.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace csi_proxy::host {

namespace {

// What the loader has under `name` now.
enum class Loaded { kNothing, kThisName, kThisFile };

Loaded LoadedAs(const std::string& name) {
  // RTLD_NOLOAD runs no constructor and maps nothing: it only finds a library loaded by that name or, through the
  // file's device and inode, by any other name.
  void* handle = dlopen(name.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) {
    dlerror();  // not an error worth keeping for LastLoadError
    return Loaded::kNothing;
  }
  link_map* map = nullptr;
  bool same_name =
      dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr && name == map->l_name;
  dlclose(handle);
  return same_name ? Loaded::kThisName : Loaded::kThisFile;
}

// A private copy of the open file `fd` in memory, or -1 (errno says why).
int PrivateCopy(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return -1;
  int memfd = memfd_create("csi-proxy-group-library", MFD_CLOEXEC);
  off_t copied = 0;  // sendfile's own offset: the file's position is left alone
  while (memfd >= 0 && copied < st.st_size) {
    ssize_t n = sendfile(memfd, fd, &copied, static_cast<size_t>(st.st_size - copied));
    if (n <= 0) {
      int err = n < 0 ? errno : EIO;
      close(memfd);
      memfd = -1;
      errno = err;
    }
  }
  return memfd;
}

}  // namespace

StatusOr<std::string> LoadPath(const TrustedFile& file, intptr_t& copy) {
  // The loader opens /proc/self/fd/N, which is the open file itself, however the path has changed since.
  int fd = static_cast<int>(file.handle());
  bool copied = false;
  for (int attempt = 0; attempt < 64; ++attempt) {
    std::string name = "/proc/self/fd/" + std::to_string(fd);
    switch (LoadedAs(name)) {
      case Loaded::kNothing:
        return name;
      case Loaded::kThisName: {
        // A library once loaded by this name and never unloaded (a library with unique symbols stays mapped after
        // dlclose) would be handed back for it: the same open file under another number.
        int other = fcntl(fd, F_DUPFD_CLOEXEC, fd + 1);
        if (other < 0) return FailedPrecondition(std::string("cannot open the library again: ") + std::strerror(errno));
        ReleasePrivateCopy(copy);
        copy = other;
        fd = other;
        break;
      }
      case Loaded::kThisFile: {
        // The same file (device and inode) serves already, perhaps with other content (changed in place): the
        // loader would hand the loaded one back, so the new content is loaded from a private copy.
        if (copied) return FailedPrecondition("cannot load a private copy of the library: the loader has it already");
        int memfd = PrivateCopy(fd);
        if (memfd < 0) {
          return FailedPrecondition(std::string("cannot make a private copy of the library: ") + std::strerror(errno));
        }
        ReleasePrivateCopy(copy);
        copy = memfd;
        fd = memfd;
        copied = true;
        break;
      }
    }
  }
  return FailedPrecondition("cannot find a name for the library that the loader does not hold already");
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

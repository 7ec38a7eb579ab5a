// See shared_library.h: dlopen, and a memfd copy when glibc would hand back the loaded library of the same path.
#include "abi/shared_library.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "abi/mapping_change.h"

namespace csi_proxy::host {
namespace {

// Where to dlopen `path` from so that a second copy is really loaded: the path itself, or, when a library of
// that name is loaded already, a memfd copy (glibc matches libraries by name and would return the loaded one).
StatusOr<std::string> LoadablePath(const std::string& path, int& memfd_out) {
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
  memfd_out = memfd;
  return "/proc/self/fd/" + std::to_string(memfd);
}

}  // namespace

StatusOr<std::unique_ptr<SharedLibrary>> SharedLibrary::Load(const std::string& path) {
  std::unique_ptr<SharedLibrary> library(new SharedLibrary());
  std::lock_guard lock(MappingChangeMutex());  // dlopen maps the library: not while pages are released
  CSI_PROXY_ASSIGN_OR_RETURN(std::string load_path, LoadablePath(path, library->private_copy_));
  library->handle_ = dlopen(load_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library->handle_ == nullptr) {
    const char* detail = dlerror();
    return FailedPrecondition("cannot load the library: " + std::string(detail != nullptr ? detail : "dlopen failed"));
  }
  return library;
}

SharedLibrary::~SharedLibrary() {
  {
    std::lock_guard lock(MappingChangeMutex());  // dlclose unmaps the library: not while pages are released
    if (handle_ != nullptr) dlclose(handle_);
  }
  if (private_copy_ >= 0) close(private_copy_);
}

void* SharedLibrary::Symbol(const char* name) const { return handle_ != nullptr ? dlsym(handle_, name) : nullptr; }

std::string LibraryFileIdentity(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return {};
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
         std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
}

}  // namespace csi_proxy::host

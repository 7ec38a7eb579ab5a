// See shared_library.h.
#include "abi/shared_library.h"

#include <mutex>

#include "abi/mapping_change.h"

namespace csi_proxy::host {

StatusOr<std::unique_ptr<SharedLibrary>> SharedLibrary::Load(TrustedFile file) {
  std::unique_ptr<SharedLibrary> library(new SharedLibrary());
  library->file_ = std::move(file);
  std::lock_guard lock(MappingChangeMutex());  // loading maps the library: not while pages are released
  CSI_PROXY_ASSIGN_OR_RETURN(std::string load_path, LoadPath(library->file_, library->private_copy_));
  boost::dll::fs::error_code error;
  library->library_.load(load_path, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local, error);
  if (error) {
    std::string detail = LastLoadError();
    return FailedPrecondition("cannot load the library: " + (detail.empty() ? error.message() : detail));
  }
  return library;
}

SharedLibrary::~SharedLibrary() {
  {
    std::lock_guard lock(MappingChangeMutex());  // unloading unmaps the library: not while pages are released
    library_.unload();
  }
  ReleasePrivateCopy(private_copy_);
}

}  // namespace csi_proxy::host

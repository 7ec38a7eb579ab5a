// A shared library loaded into the host: the one way the host loads code, over Boost.DLL (shared_library.cc).
// What is loaded is the file the trusted-file checks opened (config/trusted_files.h), never the path again.
// Every load and unload holds MappingChangeMutex. The system's part (the name the loader takes the open file by,
// a private copy when the loader would hand back a library already loaded, the loader's reason for a failure, a
// file's identity) is shared_library_linux.cc; a Windows side goes beside it.
#pragma once

#include <boost/dll/shared_library.hpp>  // with BOOST_DLL_USE_STD_FS (abi/CMakeLists.txt)

#include <cstdint>
#include <memory>
#include <string>

#include "config/trusted_files.h"
#include "csi_proxy/status.hpp"

namespace csi_proxy::host {

class SharedLibrary {
 public:
  // Loads the open `file` with its symbols resolved now and kept to itself (RTLD_NOW | RTLD_LOCAL, as
  // plugin_abi.h says), and keeps it open while loaded. When the loader already has that file loaded (the same
  // file changed in place while the old build still serves), a private copy of it is loaded instead, so that the
  // new build really runs. FAILED_PRECONDITION with the loader's reason ("cannot load the library: ...") when it
  // cannot be loaded.
  static StatusOr<std::unique_ptr<SharedLibrary>> Load(TrustedFile file);
  ~SharedLibrary();  // unloads it
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;

  // The exported function `name` of type `Fn`; null when the library has no such symbol.
  template <typename Fn>
  Fn* Function(const char* name) const {
    return library_.has(name) ? &library_.get<Fn>(name) : nullptr;
  }

 private:
  SharedLibrary() = default;
  boost::dll::shared_library library_;
  TrustedFile file_;            // the file checked and loaded
  intptr_t private_copy_ = -1;  // what was loaded instead of `file_`, if anything (LoadPath); released after unloading
};

// What identifies the library file at `path` now (its device, inode, size and modification time), so that a new
// build installed at the same path is told from the loaded one; empty when the file cannot be read.
std::string LibraryFileIdentity(const std::string& path);

// The system's part of loading, in shared_library_<system>.cc:
// The name the system loader takes the open `file` by, so that it loads that file and not one it has loaded
// already; when that takes another handle (a private copy, another name of the open file), it goes to `copy`
// (-1 when none was made).
StatusOr<std::string> LoadPath(const TrustedFile& file, intptr_t& copy);
// Releases what LoadPath made once the library loaded from it is unloaded.
void ReleasePrivateCopy(intptr_t copy);
// The system loader's reason for the load that just failed, or "" when it gives none.
std::string LastLoadError();

}  // namespace csi_proxy::host

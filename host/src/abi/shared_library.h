// A shared library loaded into the host: the one way the host loads code, over Boost.DLL (shared_library.cc).
// Every load and unload holds MappingChangeMutex. The system's part (a private copy for an upgrade at the same
// path, the loader's reason for a failure, a file's identity) is shared_library_linux.cc; a Windows side goes
// beside it.
#pragma once

#include <boost/dll/shared_library.hpp>  // with BOOST_DLL_USE_STD_FS (abi/CMakeLists.txt)

#include <cstdint>
#include <memory>
#include <string>

#include "csi_proxy/status.hpp"

namespace csi_proxy::host {

class SharedLibrary {
 public:
  // Loads `path` with its symbols resolved now and kept to itself (RTLD_NOW | RTLD_LOCAL, as plugin_abi.h says).
  // When a library of that path is loaded already (a new build installed at the same path while the old one still
  // serves), a private copy of the file is loaded instead, so that the new build really runs. FAILED_PRECONDITION
  // with the loader's reason ("cannot load the library: ...") when it cannot be loaded.
  static StatusOr<std::unique_ptr<SharedLibrary>> Load(const std::string& path);
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
  intptr_t private_copy_ = -1;  // the private copy loaded, if one was (PrivateLoadPath); released after unloading
};

// What identifies the library file at `path` now (its device, inode, size and modification time), so that a new
// build installed at the same path is told from the loaded one; empty when the file cannot be read.
std::string LibraryFileIdentity(const std::string& path);

// The system's part of loading, in shared_library_<system>.cc:
// Where to load `path` from so that it really loads while a library of that path is loaded already: `path`
// itself, or a private copy of the file, whose handle goes to `copy` (-1 when none was made).
StatusOr<std::string> PrivateLoadPath(const std::string& path, intptr_t& copy);
// Releases a private copy once the library loaded from it is unloaded.
void ReleasePrivateCopy(intptr_t copy);
// The system loader's reason for the load that just failed, or "" when it gives none.
std::string LastLoadError();

}  // namespace csi_proxy::host

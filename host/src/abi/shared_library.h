// A shared library loaded into the host: the one way the host loads code (shared_library_linux.cc: dlopen; a
// Windows side goes beside it). Every load and unload holds MappingChangeMutex.
#pragma once

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

  // The address of the exported symbol `name`; null when the library has none.
  void* Symbol(const char* name) const;

 private:
  SharedLibrary() = default;
  void* handle_ = nullptr;
  int private_copy_ = -1;  // the file descriptor of the private copy, if one was loaded; closed after unloading
};

// What identifies the library file at `path` now (its device, inode, size and modification time), so that a new
// build installed at the same path is told from the loaded one; empty when the file cannot be read.
std::string LibraryFileIdentity(const std::string& path);

}  // namespace csi_proxy::host

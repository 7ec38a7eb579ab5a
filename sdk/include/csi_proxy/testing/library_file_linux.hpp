// csi_proxy/testing/library_file_linux.hpp: a group library file opened as the csi-proxy host opens it on Linux
// (dlopen with RTLD_NOW | RTLD_LOCAL, an absolute path), for testing/fake_host.hpp.
#pragma once

#include <dlfcn.h>

#include <string>
#include <utility>

#include "csi_proxy/status.hpp"

namespace csi_proxy::sdk::testing {

class LibraryFile {
 public:
  LibraryFile() = default;  // no file
  // NOT_FOUND when the file does not load (the loader's reason in the message).
  static StatusOr<LibraryFile> Open(const std::string& path) {
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      return NotFound("cannot load " + path + ": " + (why != nullptr ? why : "unknown reason"));
    }
    return LibraryFile(handle);
  }
  LibraryFile(LibraryFile&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  LibraryFile& operator=(LibraryFile&& other) noexcept {
    if (this != &other) {
      Close();
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  LibraryFile(const LibraryFile&) = delete;
  LibraryFile& operator=(const LibraryFile&) = delete;
  ~LibraryFile() { Close(); }

  // The address of an exported symbol, or null.
  void* Symbol(const char* name) const { return handle_ != nullptr ? dlsym(handle_, name) : nullptr; }
  // Keeps the library loaded for the rest of the process: a library whose code may still run (a call it never
  // completed) must not be unloaded.
  void KeepLoaded() { handle_ = nullptr; }

 private:
  explicit LibraryFile(void* handle) : handle_(handle) {}
  void Close() {
    if (handle_ != nullptr) dlclose(handle_);
    handle_ = nullptr;
  }
  void* handle_ = nullptr;
};

}  // namespace csi_proxy::sdk::testing

// csi_proxy/testing/library_file_windows.hpp: a group library file opened as the csi-proxy host opens it on
// Windows (LoadLibraryExW of an absolute path, the DLL's own directory first for its dependencies), for
// testing/fake_host.hpp.
#pragma once

#include <windows.h>

#include <string>
#include <utility>

#include "csi_proxy/status.hpp"

namespace csi_proxy::sdk::testing {

class LibraryFile {
 public:
  LibraryFile() = default;  // no file
  // NOT_FOUND when the file does not load (the loader's error code in the message).
  static StatusOr<LibraryFile> Open(const std::string& path) {
    int n = MultiByteToWideChar(CP_UTF8, 0, path.data(), static_cast<int>(path.size()), nullptr, 0);
    std::wstring wide(static_cast<size_t>(n), L'\0');
    MultiByteToWideChar(CP_UTF8, 0, path.data(), static_cast<int>(path.size()), wide.data(), n);
    HMODULE handle = LoadLibraryExW(wide.c_str(), nullptr, LOAD_WITH_ALTERED_SEARCH_PATH);
    if (handle == nullptr) {
      return NotFound("cannot load " + path + ": Windows error " + std::to_string(GetLastError()));
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
  void* Symbol(const char* name) const {
    return handle_ != nullptr ? reinterpret_cast<void*>(GetProcAddress(handle_, name)) : nullptr;
  }
  // Keeps the library loaded for the rest of the process: a library whose code may still run (a call it never
  // completed) must not be unloaded.
  void KeepLoaded() { handle_ = nullptr; }

 private:
  explicit LibraryFile(HMODULE handle) : handle_(handle) {}
  void Close() {
    if (handle_ != nullptr) FreeLibrary(handle_);
    handle_ = nullptr;
  }
  HMODULE handle_ = nullptr;
};

}  // namespace csi_proxy::sdk::testing

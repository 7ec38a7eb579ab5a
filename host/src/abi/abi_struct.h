// Reading and writing the growable structs of plugin_abi.h, the one place where the host applies the ABI's
// growth rule: every struct starts with struct_size, a reader copies min(struct_size, sizeof) into a zeroed
// struct and refuses one shorter than its version-1 fields.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "csi_proxy/status.hpp"

namespace csi_proxy::host {

// A zero-filled copy of the struct a library filled at `in`, whose struct_size is the number of bytes copied. `v1_size`
// is its CSI_PROXY_*_V1_SIZE; `readable` bounds the bytes the host may read (an array's stride) when it is smaller than
// in->struct_size. A struct shorter than v1_size is refused with INVALID_ARGUMENT:
// "<what> is truncated or malformed: struct_size 12, expected at least 40".
template <typename T>
StatusOr<T> ReadAbiStruct(const T* in, size_t v1_size, const std::string& what, size_t readable = SIZE_MAX) {
  static_assert(std::is_trivially_copyable_v<T> && std::is_same_v<decltype(in->struct_size), size_t>);
  if (in == nullptr) return InvalidArgument(what + " is missing");
  const size_t size = std::min(in->struct_size, readable);
  if (size < v1_size) {
    return InvalidArgument(what + " is truncated or malformed: struct_size " + std::to_string(size) +
                           ", expected at least " + std::to_string(v1_size));
  }
  T out{};
  std::memcpy(&out, in, std::min(size, sizeof out));
  out.struct_size = std::min(size, sizeof out);  // what the copy holds
  return out;
}

// Writes the fields of `full` that fit within out->struct_size into a struct the library owns, leaving its
// struct_size and every byte beyond what the host knows untouched.
template <typename T>
void WriteAbiStruct(const T& full, T* out) {
  static_assert(std::is_trivially_copyable_v<T> && offsetof(T, struct_size) == 0);
  if (out == nullptr || out->struct_size <= sizeof(size_t)) return;
  const size_t n = std::min(out->struct_size, sizeof full);
  std::memcpy(reinterpret_cast<char*>(out) + sizeof(size_t), reinterpret_cast<const char*>(&full) + sizeof(size_t),
              n - sizeof(size_t));
}

}  // namespace csi_proxy::host

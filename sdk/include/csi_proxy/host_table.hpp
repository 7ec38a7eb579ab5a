// csi_proxy/host_table.hpp: the library's copy of the host's function table (csi_proxy_host_api), read by the
// ABI's growth rule. Part of the C++ layer (plugin.hpp); a group's own code does not need it directly.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "csi_proxy/plugin_abi.h"

namespace csi_proxy::sdk::internal {

// The ABI's growth rule for a struct the host filled: a zero-filled copy of min(struct_size, sizeof) bytes,
// whose struct_size is the number of bytes copied. False (and `out` zeroed) when `in` is null or shorter than
// `v1_size`, its CSI_PROXY_*_V1_SIZE.
template <typename T>
bool ReadAbiStruct(const T* in, size_t v1_size, T& out) {
  static_assert(std::is_trivially_copyable_v<T> && std::is_same_v<decltype(in->struct_size), size_t>);
  out = T{};
  if (in == nullptr || in->struct_size < v1_size) return false;
  const size_t size = std::min(in->struct_size, sizeof out);
  std::memcpy(&out, in, size);
  out.struct_size = size;
  return true;
}

// This library's copy of the host table, read by the growth rule in init, before any handler can run;
// read-only afterwards. Each group library is its own shared object with hidden visibility, so this is per
// library.
inline csi_proxy_host_api& HostTable() {
  static csi_proxy_host_api table{};
  return table;
}
// The host table, or null before init.
inline const csi_proxy_host_api* HostApi() {
  const csi_proxy_host_api& table = HostTable();
  return table.struct_size != 0 ? &table : nullptr;
}

}  // namespace csi_proxy::sdk::internal

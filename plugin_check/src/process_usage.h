// What a process holds of the system, as the leak checks compare it before and after reloads: its open file
// descriptors and its resident memory. The system's part is process_usage_linux.cc.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace csi_proxy::plugin_check {

// This process's open file descriptors, each with what it refers to ("/dev/null", "socket:[123]").
std::map<int, std::string> OpenFileDescriptors();

// This process's resident memory in bytes, after the allocator gave back the free memory it can, so that what
// remains is memory in use; -1 when unknown.
int64_t ResidentBytesInUse();

}  // namespace csi_proxy::plugin_check

namespace csi_proxy::plugin_check {

// Whether anything is mounted at or below the directory `path` (the kit then leaves its scratch directory alone).
bool HasMountsUnder(const std::string& path);

}  // namespace csi_proxy::plugin_check

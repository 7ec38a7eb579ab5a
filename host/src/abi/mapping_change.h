// The one lock over changes to the process's memory map made at run time by loading and unloading libraries.
#pragma once

#include <mutex>

namespace csi_proxy::host {

// Held by whoever maps or unmaps a library at run time (the plugin loader's dlopen and dlclose), and by
// ReleaseFilePages from reading the mappings to its last madvise: DONTNEED on a range that meanwhile holds
// something else (a new library's relocated data, memory malloc mapped where an unloaded library was) would
// discard that memory.
std::mutex& MappingChangeMutex();

}  // namespace csi_proxy::host

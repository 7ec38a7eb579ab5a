// See page_trim.h: the mappings from /proc/self/smaps, the pages given back with madvise(MADV_DONTNEED); the free
// heap with glibc's malloc_trim.
#include "runtime/page_trim.h"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "abi/mapping_change.h"

namespace csi_proxy::host {
namespace {

struct Mapping {
  uintptr_t start = 0;
  uintptr_t end = 0;
  bool candidate = false;  // private, read-only, a regular file
  size_t rss_kib = 0;
  size_t anonymous_kib = 0;
};

// /proc/self/smaps: a header line per mapping ("start-end perms offset dev inode path"), then "Key: N kB" lines.
std::vector<Mapping> ReadMappings() {
  std::vector<Mapping> mappings;
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  while (std::getline(smaps, line)) {
    unsigned long start = 0, end = 0;
    char perms[5] = {};
    unsigned long long offset = 0, inode = 0;
    char dev[16] = {};
    int path_at = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx %4s %llx %15s %llu %n", &start, &end, perms, &offset, dev, &inode,
                    &path_at) >= 6) {
      Mapping m;
      m.start = start;
      m.end = end;
      // An inode and a path that is a file ("/..."): not the heap, a stack, [vdso] or an anonymous mapping.
      bool file = inode != 0 && path_at > 0 && static_cast<size_t>(path_at) < line.size() && line[path_at] == '/';
      m.candidate = file && perms[1] == '-' && perms[3] == 'p';
      mappings.push_back(m);
      continue;
    }
    if (mappings.empty()) continue;
    size_t kib = 0;
    if (std::sscanf(line.c_str(), "Rss: %zu kB", &kib) == 1) mappings.back().rss_kib = kib;
    if (std::sscanf(line.c_str(), "Anonymous: %zu kB", &kib) == 1) mappings.back().anonymous_kib = kib;
  }
  return mappings;
}

// VmRSS from /proc/self/statm, in KiB.
size_t ResidentKib() {
  std::ifstream statm("/proc/self/statm");
  size_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE)) / 1024;
}

}  // namespace

size_t ReleaseFreeHeap() {
  size_t before = ResidentKib();
  malloc_trim(0);  // every arena: the free top of each and the free pages inside
  size_t after = ResidentKib();
  return before > after ? before - after : 0;
}

size_t ReleaseFilePages() {
  std::lock_guard lock(MappingChangeMutex());
  size_t released = 0;
  for (const Mapping& m : ReadMappings()) {
    // A mapping with anonymous pages was written to (a relocated read-only section): those pages are not in the
    // file, so it is left alone whole.
    if (!m.candidate || m.rss_kib == 0 || m.anonymous_kib != 0) continue;
    if (madvise(reinterpret_cast<void*>(m.start), m.end - m.start, MADV_DONTNEED) == 0) released += m.rss_kib;
  }
  return released;
}

}  // namespace csi_proxy::host

// Open descriptors from /proc/self/fd, resident memory from /proc/self/statm after glibc's malloc_trim.
#include <dirent.h>
#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "process_usage.h"

namespace csi_proxy::plugin_check {

std::map<int, std::string> OpenFileDescriptors() {
  std::map<int, std::string> out;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return out;
  const int own = dirfd(dir);
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const int fd = std::atoi(entry->d_name);
    if (fd == own) continue;
    char target[512];
    const std::string link = std::string("/proc/self/fd/") + entry->d_name;
    const ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
    out[fd] = n > 0 ? std::string(target, static_cast<size_t>(n)) : "?";
  }
  closedir(dir);
  return out;
}

int64_t ResidentBytesInUse() {
  malloc_trim(0);
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  long long size = 0, resident = 0;
  const int read = std::fscanf(f, "%lld %lld", &size, &resident);
  std::fclose(f);
  if (read != 2) return -1;
  return static_cast<int64_t>(resident) * sysconf(_SC_PAGESIZE);
}

}  // namespace csi_proxy::plugin_check

namespace csi_proxy::plugin_check {

bool HasMountsUnder(const std::string& path) {
  std::FILE* f = std::fopen("/proc/self/mountinfo", "r");
  if (f == nullptr) return true;  // unknown: keep the directory
  char line[4096];
  bool found = false;
  while (!found && std::fgets(line, sizeof line, f) != nullptr) {
    // The fifth field is the mount point (octal escapes for blanks; the scratch path has none).
    char mount_point[4096];
    if (std::sscanf(line, "%*s %*s %*s %*s %4095s", mount_point) != 1) continue;
    const std::string mp = mount_point;
    found = mp == path || mp.rfind(path + "/", 0) == 0;
  }
  std::fclose(f);
  return found;
}

}  // namespace csi_proxy::plugin_check

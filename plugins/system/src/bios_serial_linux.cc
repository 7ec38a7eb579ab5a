// Reads the BIOS serial from DMI or the device tree; see bios_serial_linux.h.
#include "bios_serial_linux.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace csi_proxy::system {
namespace {

constexpr size_t kMaxSerialBytes = 4096;  // sysfs attributes are at most a page

// Reads a small file whole. Returns errno on failure.
int ReadSmallFile(const std::string& path, std::string& out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return errno;
  out.clear();
  char buf[512];
  while (out.size() < kMaxSerialBytes) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return err;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  if (out.size() > kMaxSerialBytes) out.resize(kMaxSerialBytes);
  return 0;
}

}  // namespace

StatusOr<std::string> LinuxBiosInfo::SerialNumber() {
  std::string missing;
  for (const std::string& path : sources_) {
    std::string value;
    int err = ReadSmallFile(path, value);
    if (err == ENOENT || err == ENOTDIR) {
      missing += (missing.empty() ? "" : "; ") + path + ": " + std::strerror(err);
      continue;
    }
    if (err == EACCES || err == EPERM) {
      return PermissionDenied("reading the BIOS serial number from " + path + ": " + std::strerror(err));
    }
    if (err != 0) return Internal("reading the BIOS serial number from " + path + ": " + std::strerror(err));
    // DMI attributes end with a newline; device-tree strings with a NUL. Strip those, nothing else.
    while (!value.empty() && (value.back() == '\n' || value.back() == '\0')) value.pop_back();
    return value;
  }
  return FailedPrecondition("this machine exposes no BIOS serial number (no DMI and no device tree): " + missing);
}

std::unique_ptr<BiosInfoSource> MakeBiosInfoSource(const SystemBackendOptions& options) {
  if (options.bios_serial_files.empty()) return std::make_unique<LinuxBiosInfo>();
  return std::make_unique<LinuxBiosInfo>(options.bios_serial_files);
}

}  // namespace csi_proxy::system

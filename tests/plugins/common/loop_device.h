// Test fixtures for real block devices: a loop device with partition scanning over a sparse file, detached on
// destruction.
#pragma once

#include <fcntl.h>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "run_program.h"
#include "temp_dir.h"

namespace csi_proxy::testing {

// The absolute path of a system program, or "" if it is not installed (the test then skips).
inline std::string SystemProgram(const std::string& name) {
  auto path = common::FindSystemProgram(name);
  return path.ok() ? *path : std::string();
}

// What keeps a test from using loop devices here, or "" if nothing does.
inline std::string LoopDevicesUnavailableReason() {
  if (geteuid() != 0) return "needs root to attach loop devices";
  if (access("/dev/loop-control", R_OK | W_OK) != 0) return "needs /dev/loop-control (loop driver)";
  return {};
}

// Skips the current test when loop devices are unavailable, naming what is missing.
#define CSI_PROXY_SKIP_WITHOUT_LOOP_DEVICES()                                                               \
  do {                                                                                                      \
    if (auto why = ::csi_proxy::testing::LoopDevicesUnavailableReason(); !why.empty()) GTEST_SKIP() << why; \
  } while (0)

class LoopDevice {
 public:
  // A loop device over a new sparse file of `size_bytes`, with LO_FLAGS_PARTSCAN unless `partscan` is false.
  // Throws on failure; callers check LoopDevicesUnavailableReason() first and skip.
  explicit LoopDevice(uint64_t size_bytes, bool partscan = true) {
    backing_ = dir_.Sub("disk.img");
    int file = open(backing_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (file < 0) Fail("create backing file");
    if (ftruncate(file, static_cast<off_t>(size_bytes)) != 0) {
      close(file);
      Fail("ftruncate");
    }
    int control = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    if (control < 0) {
      close(file);
      Fail("open /dev/loop-control");
    }
    // Another process may take the free device between GET_FREE and CONFIGURE: retry.
    for (int attempt = 0; attempt < 20 && fd_ < 0; ++attempt) {
      int index = ioctl(control, LOOP_CTL_GET_FREE);
      if (index < 0) break;
      std::string path = "/dev/loop" + std::to_string(index);
      int fd = -1;
      for (int i = 0; i < 100 && fd < 0; ++i) {  // the node appears with the device
        fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
        if (fd < 0) usleep(10000);
      }
      if (fd < 0) continue;
      struct loop_config config {};
      config.fd = static_cast<uint32_t>(file);
      config.info.lo_flags = LO_FLAGS_AUTOCLEAR;  // autoclear: even a crashed test frees the device
      if (partscan) config.info.lo_flags |= LO_FLAGS_PARTSCAN;
      if (ioctl(fd, LOOP_CONFIGURE, &config) == 0) {
        fd_ = fd;
        path_ = path;
        name_ = "loop" + std::to_string(index);
      } else {
        close(fd);
      }
    }
    close(control);
    close(file);
    if (fd_ < 0) Fail("attach a loop device");
  }

  ~LoopDevice() {
    if (fd_ >= 0) {
      ioctl(fd_, LOOP_CLR_FD);  // deferred by the kernel while a partition is still open
      close(fd_);
    }
  }
  LoopDevice(const LoopDevice&) = delete;
  LoopDevice& operator=(const LoopDevice&) = delete;

  const std::string& path() const { return path_; }  // /dev/loopN
  const std::string& name() const { return name_; }  // loopN
  std::string PartitionPath(int n) const { return path_ + "p" + std::to_string(n); }
  uint32_t DiskNumber() const {
    std::ifstream in("/sys/block/" + name_ + "/diskseq");
    uint64_t seq = 0;
    in >> seq;
    return static_cast<uint32_t>(seq);
  }

  // Grows the backing file and tells the loop driver (LOOP_SET_CAPACITY); the kernel sees the new size at once.
  void Grow(uint64_t new_size) {
    if (truncate(backing_.c_str(), static_cast<off_t>(new_size)) != 0) Fail("grow backing file");
    if (ioctl(fd_, LOOP_SET_CAPACITY, 0) != 0) Fail("LOOP_SET_CAPACITY");
  }

  // Reads raw bytes from the device.
  std::string ReadAt(uint64_t offset, size_t length) {
    std::string data(length, '\0');
    if (pread(fd_, data.data(), length, static_cast<off_t>(offset)) != static_cast<ssize_t>(length)) Fail("pread");
    return data;
  }

  // Reads raw bytes from the backing file, beneath the loop device and its caches.
  std::string ReadBackingFile(uint64_t offset, size_t length) {
    std::ifstream in(backing_, std::ios::binary);
    in.seekg(static_cast<std::streamoff>(offset));
    std::string data(length, '\0');
    in.read(data.data(), static_cast<std::streamsize>(length));
    return data.substr(0, static_cast<size_t>(in.gcount()));
  }
  const std::string& backing_file() const { return backing_; }

  // Writes raw bytes to the device at `offset` (e.g. to plant a signature).
  void WriteAt(uint64_t offset, const std::string& data) {
    if (pwrite(fd_, data.data(), data.size(), static_cast<off_t>(offset)) != static_cast<ssize_t>(data.size())) {
      Fail("pwrite");
    }
    fsync(fd_);
  }

 private:
  [[noreturn]] void Fail(const std::string& what) {
    throw std::runtime_error("loop device fixture: " + what + ": " + strerror(errno));
  }

  TempDir dir_;
  std::string backing_;
  int fd_ = -1;
  std::string path_;
  std::string name_;
};

}  // namespace csi_proxy::testing

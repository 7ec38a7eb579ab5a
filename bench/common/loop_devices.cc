// See loop_devices.h.
#include "loop_devices.h"

#include <fcntl.h>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cleanup.h"

namespace csi_proxy::bench {
using namespace ::csi_proxy::testing;  // the support library shared with the tests (tests/support)

std::string LoopDevicesUnavailableReason() {
  if (geteuid() != 0) return "needs root to attach loop devices";
  if (access("/dev/loop-control", R_OK | W_OK) != 0) return "needs /dev/loop-control (the loop driver)";
  return {};
}

StatusOr<std::unique_ptr<LoopDevice>> LoopDevice::Attach(const std::string& backing_path, uint64_t size_bytes) {
  std::unique_ptr<LoopDevice> dev(new LoopDevice());
  int file = open(backing_path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (file < 0) return Internal("cannot create " + backing_path + ": " + std::strerror(errno));
  dev->backing_ = backing_path;
  dev->path_slot_ = RegisterPath(backing_path);
  if (ftruncate(file, static_cast<off_t>(size_bytes)) != 0) {
    int err = errno;
    close(file);
    return Internal("ftruncate " + backing_path + ": " + std::strerror(err));
  }
  int control = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
  if (control < 0) {
    int err = errno;
    close(file);
    return FailedPrecondition(std::string("cannot open /dev/loop-control: ") + std::strerror(err));
  }
  std::string last_error = "no free loop device";
  // Another program may take the free device between GET_FREE and CONFIGURE (EBUSY): ask again.
  for (int attempt = 0; attempt < 50 && dev->fd_ < 0; ++attempt) {
    int index = ioctl(control, LOOP_CTL_GET_FREE);
    if (index < 0) {
      last_error = std::string("LOOP_CTL_GET_FREE: ") + std::strerror(errno);
      break;
    }
    std::string path = "/dev/loop" + std::to_string(index);
    int fd = -1;
    for (int i = 0; i < 200 && fd < 0; ++i) {  // the node appears shortly after the device
      fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
      if (fd < 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (fd < 0) {
      last_error = "cannot open " + path + ": " + std::strerror(errno);
      continue;
    }
    loop_config config{};
    config.fd = static_cast<uint32_t>(file);
    config.info.lo_flags = LO_FLAGS_AUTOCLEAR | LO_FLAGS_PARTSCAN;
    if (ioctl(fd, LOOP_CONFIGURE, &config) == 0) {
      dev->fd_ = fd;
      dev->loop_slot_ = RegisterLoopDevice(fd);
      dev->path_ = path;
      dev->name_ = "loop" + std::to_string(index);
    } else {
      last_error = "LOOP_CONFIGURE " + path + ": " + std::strerror(errno);
      close(fd);
    }
  }
  close(control);
  close(file);  // the device holds its own reference to the file
  if (dev->fd_ < 0) return Internal(last_error);
  return dev;
}

LoopDevice::~LoopDevice() {
  if (fd_ >= 0) {
    ioctl(fd_, LOOP_CLR_FD, 0);  // the kernel defers it while a partition is open; autoclear finishes it
    close(fd_);
  }
  UnregisterLoopDevice(loop_slot_);
  if (!backing_.empty()) unlink(backing_.c_str());
  UnregisterPath(path_slot_);
}

uint64_t LoopDevice::DiskNumber() const {
  std::ifstream in("/sys/block/" + name_ + "/diskseq");
  uint64_t seq = 0;
  in >> seq;
  return seq;
}

Status LoopPool::Resize(size_t count) {
  while (devices_.size() > count) devices_.pop_back();
  while (devices_.size() < count) {
    auto dev = LoopDevice::Attach(dir_ + "/disk-" + std::to_string(next_id_++) + ".img", size_);
    if (!dev.ok()) return dev.status();
    devices_.push_back(std::move(*dev));
  }
  return Status::Ok();
}

int CountVisibleDisks() {
  int n = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/sys/block", ec)) {
    std::ifstream in(entry.path() / "size");
    uint64_t sectors = 0;
    if (in >> sectors && sectors > 0) ++n;
  }
  return n;
}

int CountBlockEntries() {
  int n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/sys/block", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}

}  // namespace csi_proxy::bench

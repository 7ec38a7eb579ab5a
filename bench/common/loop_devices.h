// Loop devices for the benchmarks: sparse backing files attached with LOOP_CTL_GET_FREE + LOOP_CONFIGURE,
// detached on destruction, by the signal handler (cleanup.h), and by the kernel if this process dies
// (LO_FLAGS_AUTOCLEAR while we hold the only descriptor).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "csi_proxy/status.hpp"

namespace csi_proxy::bench {

// What keeps this machine from attaching loop devices, or "" if nothing does.
std::string LoopDevicesUnavailableReason();

class LoopDevice {
 public:
  // Creates `backing_path` as a sparse file of `size_bytes` and attaches it, with partition scanning.
  static StatusOr<std::unique_ptr<LoopDevice>> Attach(const std::string& backing_path, uint64_t size_bytes);
  ~LoopDevice();
  LoopDevice(const LoopDevice&) = delete;
  LoopDevice& operator=(const LoopDevice&) = delete;

  const std::string& path() const { return path_; }  // /dev/loopN
  const std::string& name() const { return name_; }  // loopN
  std::string PartitionPath(int n) const { return path_ + "p" + std::to_string(n); }
  // The kernel's diskseq: the disk number csi-proxy uses for this disk.
  uint64_t DiskNumber() const;

 private:
  LoopDevice() = default;
  int fd_ = -1;
  int loop_slot_ = -1;
  int path_slot_ = -1;
  std::string path_;
  std::string name_;
  std::string backing_;
};

// A set of loop devices that grows and shrinks on demand; benchmarks ask for 1, 8, 32, 64 disks in turn.
class LoopPool {
 public:
  LoopPool(std::string backing_dir, uint64_t disk_size_bytes) : dir_(std::move(backing_dir)), size_(disk_size_bytes) {}
  Status Resize(size_t count);
  const std::vector<std::unique_ptr<LoopDevice>>& devices() const { return devices_; }
  size_t size() const { return devices_.size(); }

 private:
  std::string dir_;
  uint64_t size_;
  uint64_t next_id_ = 0;
  std::vector<std::unique_ptr<LoopDevice>> devices_;
};

// Whole disks the kernel lists now (entries of /sys/block with a non-zero size): what a disk listing walks,
// including disks that other programs on this machine attached.
int CountVisibleDisks();
// Every entry of /sys/block, including loop devices with nothing attached (size 0): what a listing has to look at.
int CountBlockEntries();

}  // namespace csi_proxy::bench

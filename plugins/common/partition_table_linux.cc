// Disk locks and the kernel's partition view; see partition_table_linux.h.
#include "partition_table_linux.h"

#include <fcntl.h>
#include <linux/blkpg.h>
#include <linux/fs.h>
#include <sys/file.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <cerrno>
#include <thread>
#include <vector>

#include "block_probe_linux.h"
#include "errno_linux.h"
#include "mount_table_linux.h"

namespace csi_proxy::common {
namespace {

// The kernel represents an extended (container) partition by its first 1 KiB only.
constexpr uint64_t kExtendedPartitionKernelSize = 1024;

Status Blkpg(int disk_fd, int op, uint32_t number, uint64_t start_bytes, uint64_t size_bytes, const char* what) {
  struct blkpg_partition part {};
  part.start = static_cast<long long>(start_bytes);
  part.length = static_cast<long long>(size_bytes);
  part.pno = static_cast<int>(number);
  struct blkpg_ioctl_arg arg {};
  arg.op = op;
  arg.datalen = sizeof part;
  arg.data = &part;
  if (ioctl(disk_fd, BLKPG, &arg) != 0) {
    return Internal(ErrnoMessage(std::string(what) + " partition " + std::to_string(number), errno));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<UniqueFd> OpenAndLockDisk(const std::string& disk_path, int open_flags, bool exclusive,
                                   std::chrono::milliseconds timeout) {
  UniqueFd fd(open(disk_path.c_str(), open_flags | O_CLOEXEC));
  if (!fd.valid()) {
    int err = errno;
    if (err == EBUSY && (open_flags & O_EXCL)) {
      return FailedPrecondition(disk_path + " is in use (the kernel refused exclusive access)");
    }
    if (err == ENOENT || err == ENXIO) return NotFound(ErrnoMessage("open " + disk_path, err));
    return Internal(ErrnoMessage("open " + disk_path, err));
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (flock(fd.get(), (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) return Internal(ErrnoMessage("flock " + disk_path, errno));
    if (std::chrono::steady_clock::now() > deadline) {
      return Unavailable(disk_path + " is locked by another process (BSD lock held longer than " +
                         std::to_string(timeout.count()) + " ms)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return fd;
}

Status RereadPartitionTable(int disk_fd) {
  if (ioctl(disk_fd, BLKRRPART) != 0) return Internal(ErrnoMessage("BLKRRPART", errno));
  return Status::Ok();
}

Status KernelAddPartition(int disk_fd, uint32_t number, uint64_t start_bytes, uint64_t size_bytes) {
  return Blkpg(disk_fd, BLKPG_ADD_PARTITION, number, start_bytes, size_bytes, "BLKPG add");
}

Status KernelResizePartition(int disk_fd, uint32_t number, uint64_t start_bytes, uint64_t size_bytes) {
  return Blkpg(disk_fd, BLKPG_RESIZE_PARTITION, number, start_bytes, size_bytes, "BLKPG resize");
}

Status KernelDeletePartition(int disk_fd, uint32_t number) {
  return Blkpg(disk_fd, BLKPG_DEL_PARTITION, number, 0, 0, "BLKPG delete");
}

bool KernelPartitionsMatchTable(const BlockDevices& devices, const BlockDevice& disk) {
  auto entries = ReadPartitionEntries(disk.path);
  auto kernel = devices.PartitionsOf(disk);
  if (!entries.ok() || !kernel.ok() || entries->size() != kernel->size()) return false;
  for (const auto& e : *entries) {
    auto k =
        std::find_if(kernel->begin(), kernel->end(), [&](const auto& p) { return p.partition_number == e.number; });
    if (k == kernel->end() || k->start_bytes != e.start_bytes || (!e.is_extended && k->size_bytes != e.size_bytes)) {
      return false;
    }
  }
  return true;
}

Status SyncKernelPartitions(const BlockDevices& devices, const BlockDevice& disk, int disk_fd, bool remove_vanished) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto entries, ReadPartitionEntries(disk.path));
  CSI_PROXY_ASSIGN_OR_RETURN(auto kernel, devices.PartitionsOf(disk));
  CSI_PROXY_ASSIGN_OR_RETURN(auto mounts, ReadMountTable());
  Status first_error;
  auto note = [&](Status s) {
    if (!s.ok() && first_error.ok()) first_error = s.WithContext(disk.path);
  };
  auto entry_of = [&](uint32_t number) -> const PartitionEntry* {
    for (const auto& e : entries) {
      if (e.number == number) return &e;
    }
    return nullptr;
  };
  std::vector<uint32_t> present;
  for (const auto& k : kernel) {
    const PartitionEntry* e = entry_of(k.partition_number);
    if (e != nullptr && e->start_bytes == k.start_bytes) {
      present.push_back(k.partition_number);
      if (!e->is_extended && e->size_bytes != k.size_bytes) {
        note(KernelResizePartition(disk_fd, e->number, e->start_bytes, e->size_bytes));
      }
      continue;
    }
    if (!remove_vanished || devices.DescribeUse(k, mounts)) {  // gone from the table but kept (in use, or asked to)
      present.push_back(k.partition_number);
      continue;
    }
    note(KernelDeletePartition(disk_fd, k.partition_number));
  }
  for (const auto& e : entries) {
    if (std::find(present.begin(), present.end(), e.number) != present.end()) continue;
    note(KernelAddPartition(disk_fd, e.number, e.start_bytes,
                            e.is_extended ? std::min(e.size_bytes, kExtendedPartitionKernelSize) : e.size_bytes));
  }
  return first_error;
}

}  // namespace csi_proxy::common

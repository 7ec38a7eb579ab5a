// Changing a disk's partitions: the lock every change of a disk holds, and the kernel's view of the partition
// table (BLKPG, BLKRRPART) brought in line with what is written on the disk. The disk and volume groups write
// the table itself with libfdisk; block_probe_linux.h reads it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "block_device_scan_linux.h"
#include "csi_proxy/status.hpp"
#include "unique_fd_linux.h"

namespace csi_proxy::common {

// Opens a whole disk and takes the BSD lock that systemd's block-device locking convention defines
// (https://systemd.io/BLOCK_DEVICE_LOCKING/): exclusive while we change the partition table or write a
// filesystem, so udev (if it runs), other tools and the other API groups in this process wait for us.
// `open_flags` are added to O_CLOEXEC (e.g. O_RDWR | O_EXCL). UNAVAILABLE if another holder keeps the lock
// past `timeout`; FAILED_PRECONDITION if O_EXCL finds the device in use.
StatusOr<UniqueFd> OpenAndLockDisk(const std::string& disk_path, int open_flags, bool exclusive,
                                   std::chrono::milliseconds timeout = std::chrono::seconds(30));

// BLKRRPART: the kernel re-reads the partition table. Fails with EBUSY while a partition is in use.
Status RereadPartitionTable(int disk_fd);

// BLKPG: add or resize one partition in the kernel's view without touching the others.
Status KernelAddPartition(int disk_fd, uint32_t number, uint64_t start_bytes, uint64_t size_bytes);
Status KernelResizePartition(int disk_fd, uint32_t number, uint64_t start_bytes, uint64_t size_bytes);
Status KernelDeletePartition(int disk_fd, uint32_t number);

// Brings the kernel's partitions of `disk` in line with its partition table, as `partx -u` does, through
// BLKPG only (no BLKRRPART, which drops and re-creates every partition device, and finds nothing on kernels
// built without partition-table parsers): adds missing partitions and resizes changed ones; with
// `remove_vanished`, also removes partitions the table no longer has, if nothing uses them. `disk_fd` is an
// open descriptor of the disk (the caller holds its lock).
Status SyncKernelPartitions(const BlockDevices& devices, const BlockDevice& disk, int disk_fd, bool remove_vanished);

// True when the kernel's partitions of `disk` match its partition table.
bool KernelPartitionsMatchTable(const BlockDevices& devices, const BlockDevice& disk);

}  // namespace csi_proxy::common

// Changing a disk's partitions on real loop devices: the kernel's partition view through BLKPG, and the disk lock.
#include "partition_table_linux.h"

#include <fcntl.h>
#include <gtest/gtest.h>

#include <chrono>

#include "block_device_scan_linux.h"
#include "loop_device.h"

namespace csi_proxy::common {
namespace {

using testing::LoopDevice;

TEST(BlockDevices, PartitionsAppearWithTheirDiskAndNumber) {
  CSI_PROXY_SKIP_WITHOUT_LOOP_DEVICES();
  LoopDevice loop(32 << 20);
  BlockDevices devices;
  auto disk = devices.DiskByName(loop.name());
  ASSERT_TRUE(disk.ok());
  auto fd = OpenAndLockDisk(loop.path(), O_RDWR, true);
  ASSERT_TRUE(fd.ok()) << fd.status().message();
  // The kernel's view only (no table on disk): BLKPG adds partition 2 at 1 MiB, 8 MiB long.
  ASSERT_TRUE(KernelAddPartition(fd->get(), 2, 1 << 20, 8 << 20).ok());
  auto part = devices.WaitForPartition(*disk, 2, std::chrono::seconds(5));
  ASSERT_TRUE(part.ok()) << part.status().message();
  EXPECT_TRUE(part->is_partition);
  EXPECT_EQ(part->partition_number, 2u);
  EXPECT_EQ(part->disk_name, loop.name());
  EXPECT_EQ(part->path, loop.PartitionPath(2));
  EXPECT_EQ(part->start_bytes, 1u << 20);
  EXPECT_EQ(part->size_bytes, 8u << 20);
  EXPECT_EQ(part->diskseq, loop.DiskNumber());

  ASSERT_TRUE(KernelResizePartition(fd->get(), 2, 1 << 20, 16 << 20).ok());
  auto resolved = devices.ResolveVolumeId(loop.PartitionPath(2));
  ASSERT_TRUE(resolved.ok()) << resolved.status().message();
  EXPECT_EQ(resolved->size_bytes, 16u << 20);
  auto parent = devices.DiskOf(*resolved);
  ASSERT_TRUE(parent.ok());
  EXPECT_EQ(parent->name, loop.name());
  auto parts = devices.PartitionsOf(*disk);
  ASSERT_TRUE(parts.ok());
  ASSERT_EQ(parts->size(), 1u);
  EXPECT_EQ(devices.DiskByName(part->name).status().code(), Code::kFailedPrecondition);
}

TEST(OpenAndLockDisk, ASecondExclusiveLockWaitsAndTimesOut) {
  CSI_PROXY_SKIP_WITHOUT_LOOP_DEVICES();
  LoopDevice loop(16 << 20);
  auto first = OpenAndLockDisk(loop.path(), O_RDONLY, true);
  ASSERT_TRUE(first.ok());
  auto second = OpenAndLockDisk(loop.path(), O_RDONLY, true, std::chrono::milliseconds(100));
  EXPECT_EQ(second.status().code(), Code::kUnavailable);
  first->Reset();
  EXPECT_TRUE(OpenAndLockDisk(loop.path(), O_RDONLY, true, std::chrono::milliseconds(100)).ok());
}

}  // namespace
}  // namespace csi_proxy::common

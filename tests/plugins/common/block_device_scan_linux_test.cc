// The kernel's block devices as sysfs lists them: disk numbers and volume IDs on real loop devices, what uses a
// device, and the SCSI paths on a fabricated sysfs.
#include "block_device_scan_linux.h"

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "fake_sysfs.h"
#include "loop_device.h"
#include "mount_table_linux.h"
#include "run_program.h"

namespace csi_proxy::common {
namespace {

using testing::Designator;
using testing::LoopDevice;
using testing::TempDir;
using testing::VpdPage;

TEST(BlockDevices, ListsALoopDeviceUnderItsDiskseq) {
  CSI_PROXY_SKIP_WITHOUT_LOOP_DEVICES();
  LoopDevice loop(64 << 20);
  BlockDevices devices;
  auto disks = devices.ListDisks();
  ASSERT_TRUE(disks.ok()) << disks.status().message();
  auto it = std::find_if(disks->begin(), disks->end(), [&](auto& d) { return d.name == loop.name(); });
  ASSERT_NE(it, disks->end());
  EXPECT_EQ(it->diskseq, loop.DiskNumber());
  EXPECT_EQ(it->path, loop.path());
  EXPECT_EQ(it->size_bytes, 64u << 20);
  EXPECT_FALSE(it->is_partition);

  auto by_number = devices.DiskByNumber(loop.DiskNumber());
  ASSERT_TRUE(by_number.ok());
  EXPECT_EQ(by_number->name, loop.name());
  auto by_name = devices.DiskByName(loop.name());
  ASSERT_TRUE(by_name.ok());
  EXPECT_EQ(by_name->diskseq, loop.DiskNumber());
}

TEST(BlockDevices, UnknownDiskNumberIsNotFound) {
  BlockDevices devices;
  EXPECT_EQ(devices.DiskByNumber(0).status().code(), Code::kNotFound);
  EXPECT_EQ(devices.DiskByNumber(UINT32_MAX).status().code(), Code::kNotFound);
}

TEST(BlockDevices, DeviceNamesFromRequestsMustBePlainNames) {
  BlockDevices devices;
  EXPECT_EQ(devices.DeviceByName("../../etc").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(devices.DeviceByName("").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(devices.DeviceByName("nosuchdisk9").status().code(), Code::kNotFound);
}

TEST(BlockDevices, VolumeIdsMustBeBlockDevicesTheKernelLists) {
  BlockDevices devices;
  EXPECT_EQ(devices.ResolveVolumeId("").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(devices.ResolveVolumeId("-1").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(devices.ResolveVolumeId("/etc/passwd").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(devices.ResolveVolumeId("/dev/null").status().code(), Code::kInvalidArgument);  // a char device
  EXPECT_EQ(devices.ResolveVolumeId("/dev/../etc/passwd").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(devices.ResolveVolumeId("/dev/no-such-device").status().code(), Code::kNotFound);
  EXPECT_EQ(devices.ResolveVolumeId(std::string("/dev/loop0\0x", 12)).status().code(), Code::kInvalidArgument);
}

TEST(BlockDevices, SymlinksUnderDevResolveToTheCanonicalNode) {
  CSI_PROXY_SKIP_WITHOUT_LOOP_DEVICES();
  LoopDevice loop(16 << 20);
  // A link of our own under /dev (like /dev/disk/by-id/...), removed at the end.
  std::string link = "/dev/csi-proxy-test-link-" + std::to_string(getpid());
  ASSERT_EQ(symlink(loop.path().c_str(), link.c_str()), 0);
  BlockDevices devices;
  auto resolved = devices.ResolveVolumeId(link);
  unlink(link.c_str());
  ASSERT_TRUE(resolved.ok()) << resolved.status().message();
  EXPECT_EQ(resolved->path, loop.path());
  EXPECT_EQ(resolved->diskseq, loop.DiskNumber());
}

TEST(BlockDevices, DescribeUseNamesTheMountPoint) {
  CSI_PROXY_SKIP_WITHOUT_LOOP_DEVICES();
  LoopDevice loop(64 << 20);
  auto mkfs = testing::SystemProgram("mkfs.ext4");
  if (mkfs.empty()) GTEST_SKIP() << "needs mkfs.ext4";
  ASSERT_TRUE(RunProgramChecked({mkfs, "-q", "-F", loop.path()}).ok());
  TempDir dir;
  std::string mnt = dir.MakeDir("mnt");
  ASSERT_EQ(mount(loop.path().c_str(), mnt.c_str(), "ext4", 0, nullptr), 0) << strerror(errno);
  BlockDevices devices;
  auto disk = devices.DiskByName(loop.name());
  ASSERT_TRUE(disk.ok());
  auto mounts = ReadMountTable();
  ASSERT_TRUE(mounts.ok());
  auto use = devices.DescribeUse(*disk, *mounts);
  ASSERT_TRUE(use.has_value());
  EXPECT_NE(use->find("mounted at " + mnt), std::string::npos) << *use;
  EXPECT_EQ(MountsOfDevice(*mounts, *disk).size(), 1u);
  ASSERT_EQ(umount(mnt.c_str()), 0);
  mounts = ReadMountTable();
  EXPECT_FALSE(devices.DescribeUse(*disk, *mounts).has_value());
}

TEST(FakeScsiSysfs, GivesAddressIdentifiersAndState) {
  const std::string naa("\x60\x01\x40\x5a\x00\x00\x00\x01", 8);
  testing::FakeScsiDisk fake("sdz", "7:0:3:12", 4242, VpdPage(0x83, Designator(1, 0, 3, naa)),
                             VpdPage(0x80, "SERIAL-42 "));
  BlockDevices devices(fake.roots());
  auto disk = devices.DiskByNumber(4242);
  ASSERT_TRUE(disk.ok()) << disk.status().message();
  EXPECT_EQ(disk->name, "sdz");
  EXPECT_EQ(disk->path, fake.roots().dev + "/sdz");
  EXPECT_EQ(disk->devno, makedev(240, 4242));
  auto address = devices.ScsiAddressOf(*disk);
  ASSERT_TRUE(address.has_value());
  EXPECT_EQ(address->host, 7u);
  EXPECT_EQ(address->channel, 0u);
  EXPECT_EQ(address->target, 3u);
  EXPECT_EQ(address->lun, 12u);
  auto ids = devices.IdentifiersOf(*disk);
  EXPECT_EQ(ids.page83, "6001405a00000001");
  EXPECT_EQ(ids.serial_number, "SERIAL-42 ");
  ASSERT_TRUE(devices.ScsiStatePath(*disk).has_value());
  auto by_devno = devices.DeviceByDevno(makedev(240, 4242));
  ASSERT_TRUE(by_devno.ok());
  EXPECT_EQ(by_devno->name, "sdz");
}

}  // namespace
}  // namespace csi_proxy::common

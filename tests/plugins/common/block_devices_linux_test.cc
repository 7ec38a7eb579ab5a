// The shared block-device layer: parsing rules, the disk/volume naming conventions on real loop devices, and
// the SCSI paths on a fabricated sysfs.
#include "block_devices_linux.h"

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "fake_sysfs.h"
#include "loop_device.h"
#include "run_program.h"

namespace csi_proxy::common {
namespace {

using testing::Designator;
using testing::LoopDevice;
using testing::PrivateTempDir;
using testing::VpdPage;

// ---- parsing --------------------------------------------------------------------------------------------------

TEST(ParseScsiAddress, ReadsHostChannelTargetLun) {
  auto a = ParseScsiAddress("2:0:1:17");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->host, 2u);
  EXPECT_EQ(a->channel, 0u);
  EXPECT_EQ(a->target, 1u);
  EXPECT_EQ(a->lun, 17u);
}

TEST(ParseScsiAddress, RejectsNamesThatAreNotAddresses) {
  EXPECT_FALSE(ParseScsiAddress("virtio1"));
  EXPECT_FALSE(ParseScsiAddress("1:2:3"));
  EXPECT_FALSE(ParseScsiAddress("1:2:3:x"));
  EXPECT_FALSE(ParseScsiAddress("1:2:3:4:5"));
  EXPECT_FALSE(ParseScsiAddress(""));
}

TEST(SelectPage83Identifier, TakesTheFirstLunBinaryDesignatorAsLowercaseHex) {
  std::string naa = "\x60\x01\x40\x5a\xbc\xde\xf0\x12";
  auto page = VpdPage(0x83, Designator(2, 1, 8, "target-port-name") +  // association 1: not the LUN
                                Designator(1, 0, 3, naa) + Designator(2, 0, 1, "LATER"));
  EXPECT_EQ(SelectPage83Identifier(page), "6001405abcdef012");
}

TEST(SelectPage83Identifier, ReturnsAsciiDesignatorsAsRawUntrimmedBytes) {
  auto page = VpdPage(0x83, Designator(2, 0, 1, "Google  persistent-disk-0 "));
  EXPECT_EQ(SelectPage83Identifier(page), "Google  persistent-disk-0 ");
}

TEST(SelectPage83Identifier, IgnoresUtf8AndOtherAssociations) {
  auto page = VpdPage(0x83, Designator(3, 0, 8, "utf8-name") + Designator(1, 2, 3, "\x01\x02"));
  EXPECT_EQ(SelectPage83Identifier(page), "");
}

TEST(SelectPage83Identifier, SurvivesTruncatedAndEmptyPages) {
  EXPECT_EQ(SelectPage83Identifier(""), "");
  EXPECT_EQ(SelectPage83Identifier(std::string("\x00\x83\x00", 3)), "");
  auto page = VpdPage(0x83, Designator(1, 0, 3, "\x11\x22\x33\x44"));
  EXPECT_EQ(SelectPage83Identifier(page.substr(0, page.size() - 1)), "");  // descriptor runs past the end
}

TEST(ParseVpdSerial, ReturnsTheSerialUntrimmed) {
  EXPECT_EQ(ParseVpdSerial(VpdPage(0x80, "  SER123  ")), "  SER123  ");
  EXPECT_EQ(ParseVpdSerial(""), "");
}

// ---- real devices ---------------------------------------------------------------------------------------------

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

TEST(BlockDevices, DescribeUseNamesTheMountPoint) {
  CSI_PROXY_SKIP_WITHOUT_LOOP_DEVICES();
  LoopDevice loop(64 << 20);
  auto mkfs = testing::SystemProgram("mkfs.ext4");
  if (mkfs.empty()) GTEST_SKIP() << "needs mkfs.ext4";
  ASSERT_TRUE(RunProgramChecked({mkfs, "-q", "-F", loop.path()}).ok());
  PrivateTempDir dir;
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

TEST(ProbeSignatures, SeesFilesystemsAndPartitionTables) {
  CSI_PROXY_SKIP_WITHOUT_LOOP_DEVICES();
  LoopDevice loop(64 << 20);
  auto empty = ProbeSignatures(loop.path());
  ASSERT_TRUE(empty.ok()) << empty.status().message();
  EXPECT_TRUE(empty->Empty());
  auto mkfs = testing::SystemProgram("mkfs.ext4");
  if (mkfs.empty()) GTEST_SKIP() << "needs mkfs.ext4";
  ASSERT_TRUE(RunProgramChecked({mkfs, "-q", "-F", "-L", "probe-me", loop.path()}).ok());
  auto sig = ProbeSignatures(loop.path());
  ASSERT_TRUE(sig.ok());
  EXPECT_EQ(sig->fs_type, "ext4");
  EXPECT_EQ(sig->usage, "filesystem");
  EXPECT_EQ(sig->label, "probe-me");
  EXPECT_FALSE(sig->uuid.empty());
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

// ---- a fabricated SCSI disk -----------------------------------------------------------------------------------

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

// Disk identities as drivers written for Windows parse them (issue 22), from sysfs trees recorded from real disks
// in the VM lane (tests/plugins/common/disk_identities/README.md): SCSI (virtio-scsi), NVMe, virtio-blk and loop.
// What the drivers match on top of these answers is tests/plugins/disk/disk_identities_test.cc.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "block_inventory_linux.h"
#include "disk_identifiers_linux.h"
#include "disk_offline_linux.h"
#include "fake_sysfs.h"

namespace csi_proxy::common {
namespace {

using testing::RecordedDisks;

// ReadDiskIdentifiers over one recorded disk's files, as sysfs answers for them.
DiskIdentifiers IdentifiersOf(const std::string& disk) {
  return ReadDiskIdentifiers([&](const char* attribute, bool raw) -> std::optional<std::string> {
    std::ifstream in(RecordedDisks::Fixture(disk) + "/" + attribute, std::ios::binary);
    if (!in) return std::nullopt;
    std::string data(std::istreambuf_iterator<char>(in), {});
    if (!raw && !data.empty() && data.back() == '\n') data.pop_back();
    return data;
  });
}

TEST(RecordedDiskIdentities, AScsiDiskWithAnNaaDesignatorFirstGivesItsHexAsPage83) {
  auto ids = IdentifiersOf("scsi-naa-lun3");
  EXPECT_EQ(ids.page83, "5000c50015ea71ac");  // NAA (binary code set): lowercase hex, as Windows shows it
  EXPECT_EQ(ids.serial_number, "SER-LUN3");   // VPD page 0x80
}

TEST(RecordedDiskIdentities, AScsiDiskWithAVendorAndNameDesignatorGivesItVerbatim) {
  auto ids = IdentifiersOf("scsi-t10");
  EXPECT_EQ(ids.page83, "Google  persistent-disk-1");  // ASCII: the vendor field's blanks kept
  EXPECT_EQ(ids.serial_number, "persistent-disk-1");
}

TEST(RecordedDiskIdentities, AnNvmeNamespaceGivesItsControllersSerial) {
  for (const char* disk : {"nvme-eui64", "nvme-no-namespace-id"}) {
    SCOPED_TRACE(disk);
    auto ids = IdentifiersOf(disk);
    EXPECT_EQ(ids.page83, "") << "the kernel reports no namespace id for QEMU's controller";
    EXPECT_EQ(ids.serial_number, "vol0123456789abcdef0");
  }
}

TEST(RecordedDiskIdentities, AnNvmeNamespaceWithAnEui64GivesItAsPage83) {
  auto ids = IdentifiersOf("nvme-eui64-written");
  EXPECT_EQ(ids.page83, "eui.10cc9636b6e3ce3b");  // as the kernel's wwid writes it
  EXPECT_EQ(ids.serial_number, "nvme_card-pd");
}

TEST(RecordedDiskIdentities, AVirtioDiskGivesItsSerialAndNoPage83) {
  EXPECT_EQ(IdentifiersOf("virtio-blk-serial").page83, "");
  EXPECT_EQ(IdentifiersOf("virtio-blk-serial").serial_number, "virtio-disk-serial-1");
  EXPECT_EQ(IdentifiersOf("virtio-blk-no-serial").serial_number, "");
}

TEST(RecordedDiskIdentities, ALoopDeviceHasNoIdentifiers) {
  auto ids = IdentifiersOf("loop");
  EXPECT_EQ(ids.page83, "");
  EXPECT_EQ(ids.serial_number, "");
}

TEST(NvmePage83Identifier, TakesTheEui64ThenTheNguidInTheKernelsFormats) {
  EXPECT_EQ(NvmePage83Identifier("10 cc 96 36 b6 e3 ce 3b", ""), "eui.10cc9636b6e3ce3b");
  EXPECT_EQ(NvmePage83Identifier("", "6b3f0a6c-1d2e-4f50-8a9b-0c1d2e3f4a5b"), "eui.6b3f0a6c1d2e4f508a9b0c1d2e3f4a5b");
  EXPECT_EQ(NvmePage83Identifier("10 cc 96 36 b6 e3 ce 3b", "6b3f0a6c-1d2e-4f50-8a9b-0c1d2e3f4a5b"),
            "eui.10cc9636b6e3ce3b");
  EXPECT_EQ(NvmePage83Identifier("00 00 00 00 00 00 00 00", "00000000-0000-0000-0000-000000000000"), "");
  EXPECT_EQ(NvmePage83Identifier("not hex", ""), "");
  EXPECT_EQ(NvmePage83Identifier("10 cc", ""), "") << "an EUI-64 has 8 bytes";
}

// The inventory (what ListDiskIDs, ListDiskLocations and GetDiskState answer from) over all recorded disks at once.
TEST(RecordedDiskIdentities, TheInventoryKnowsEachKindsAddressIdentifiersAndState) {
  RecordedDisks sysfs({"scsi-naa-lun3", "scsi-t10", "nvme-eui64", "nvme-no-namespace-id", "nvme-eui64-written",
                       "virtio-blk-serial", "virtio-blk-no-serial", "loop"});
  BlockInventory inventory(sysfs.roots());
  auto disks = inventory.ListDisks();
  ASSERT_TRUE(disks.ok()) << disks.status().message();
  ASSERT_EQ((*disks)->size(), 8u);
  std::map<std::string, BlockEntry> by_name;
  for (const auto& e : **disks) by_name[e.device.name] = e;

  const auto& lun3 = by_name.at("sda");
  ASSERT_TRUE(lun3.scsi_address.has_value());
  EXPECT_EQ(lun3.scsi_address->host, 0u);
  EXPECT_EQ(lun3.scsi_address->target, 1u);
  EXPECT_EQ(lun3.scsi_address->lun, 3u);
  EXPECT_TRUE(lun3.has_scsi_state);
  EXPECT_EQ(lun3.ids.page83, "5000c50015ea71ac");
  EXPECT_EQ(by_name.at("sdb").ids.page83, "Google  persistent-disk-1");
  for (const char* name : {"nvme0n1", "nvme0n2", "nvme1n1", "vda", "vdb", "loop0"}) {
    SCOPED_TRACE(name);
    EXPECT_FALSE(by_name.at(name).scsi_address.has_value()) << "only SCSI disks have a location";
    EXPECT_FALSE(by_name.at(name).has_scsi_state) << "an NVMe controller's state is not a SCSI device state";
  }
  EXPECT_EQ(by_name.at("nvme1n1").ids.page83, "eui.10cc9636b6e3ce3b");
  EXPECT_EQ(by_name.at("vda").ids.serial_number, "virtio-disk-serial-1");
}

// What an offline record of a disk without a kernel state is keyed by: stable beyond this boot where the disk has
// anything stable.
TEST(RecordedDiskIdentities, EachKindHasAStableKeyForItsOfflineState) {
  RecordedDisks sysfs(
      {"nvme-no-namespace-id", "nvme-eui64-written", "virtio-blk-serial", "virtio-blk-no-serial", "loop"});
  BlockInventory inventory(sysfs.roots());
  auto disks = inventory.ListDisks();
  ASSERT_TRUE(disks.ok());
  std::map<std::string, std::string> keys;
  for (const auto& e : **disks) keys[e.device.name] = DiskStableKey(sysfs.roots(), e);
  EXPECT_EQ(keys["nvme0n2"], "wwid:" + RecordedDisks::ReadFixture("nvme-no-namespace-id", "wwid"));
  EXPECT_EQ(keys["nvme1n1"], "wwid:eui.10cc9636b6e3ce3b");
  EXPECT_EQ(keys["vda"], "serial:virtio-disk-serial-1");
  EXPECT_EQ(keys["loop0"], "loop:/tmp/loop-backing.img");
  EXPECT_EQ(keys["vdb"].rfind("boot:", 0), 0u) << "nothing stable: this boot's id and the diskseq";
  EXPECT_NE(keys["vdb"].find(":diskseq:10"), std::string::npos) << keys["vdb"];
}

}  // namespace
}  // namespace csi_proxy::common

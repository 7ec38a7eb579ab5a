// Drivers find their disk by parsing ListDiskIDs and ListDiskLocations (issue 22). Each driver's rule, as its
// Windows code applies it (file names from the drivers' repositories), against the disk group's answers for disks
// recorded from real ones in the VM lane (tests/plugins/common/disk_identities/README.md).
#include <gtest/gtest.h>

#include <cstdint>
#include <sstream>
#include <string>

#include "disk_backend_linux.h"
#include "disk_service.h"
#include "fake_sysfs.h"

namespace csi_proxy::disk {
namespace {

using testing::RecordedDisks;

class DriverDiskLookup : public ::testing::Test {
 protected:
  DriverDiskLookup()
      : sysfs_(
            {"scsi-naa-lun3", "scsi-t10", "nvme-no-namespace-id", "nvme-eui64-written", "virtio-blk-serial", "loop"}),
        service_(std::make_unique<LinuxDiskBackend>(LinuxDiskOptions{.roots = sysfs_.roots()})) {
    auto ids = service_.ListDiskIds();
    EXPECT_TRUE(ids.ok()) << ids.status().message();
    if (ids.ok()) ids_ = *ids;
    auto locations = service_.ListDiskLocations();
    EXPECT_TRUE(locations.ok()) << locations.status().message();
    if (locations.ok()) locations_ = *locations;
  }
  static uint32_t DiskNumberOf(const std::string& disk) {
    return static_cast<uint32_t>(std::stoul(RecordedDisks::ReadFixture(disk, "diskseq")));
  }

  RecordedDisks sysfs_;
  DiskService service_;
  std::map<uint32_t, DiskIds> ids_;
  std::map<uint32_t, DiskLocation> locations_;
};

// azuredisk-csi-driver (csi-proxy mode: pkg/azuredisk/azure_common_windows.go, pkg/mounter/safe_mounter_windows.go):
// every second, ListDiskLocations; the disk whose LUNID equals publish_context["LUN"] as a decimal string.
TEST_F(DriverDiskLookup, AzureDiskFindsItsDataDiskByLun) {
  std::vector<uint32_t> found;
  for (const auto& [number, location] : locations_) {
    if (location.lun_id == "3") found.push_back(number);
  }
  EXPECT_EQ(found, std::vector<uint32_t>{DiskNumberOf("scsi-naa-lun3")});
  EXPECT_EQ(locations_.size(), 2u) << "the two SCSI disks; NVMe, virtio and loop disks have no SCSI address";
}

// gcp-compute-persistent-disk-csi-driver, pkg/mount-manager/safe-mounter-v1_windows.go: an NVMe disk by its EUI
// (a Page83 starting with "eui.", its first 16 hex digits as a number equal to the metadata server's
// nvmeNamespaceIdentifier); otherwise the last word of Page83 equals the device name.
TEST_F(DriverDiskLookup, GcePdFindsAnNvmeDiskByItsEuiAndAScsiDiskByTheLastWordOfPage83) {
  const uint64_t namespace_identifier = 0x10cc9636b6e3ce3bull;
  std::vector<uint32_t> by_eui, by_name;
  for (const auto& [number, ids] : ids_) {
    if (ids.page83.rfind("eui.", 0) == 0 && ids.page83.size() >= 20 &&
        std::stoull(ids.page83.substr(4, 16), nullptr, 16) == namespace_identifier) {
      by_eui.push_back(number);
    }
    std::istringstream words(ids.page83);
    std::string word, last;
    while (words >> word) last = word;
    if (!last.empty() && last == "persistent-disk-1") by_name.push_back(number);
  }
  EXPECT_EQ(by_eui, std::vector<uint32_t>{DiskNumberOf("nvme-eui64-written")});
  EXPECT_EQ(by_name, std::vector<uint32_t>{DiskNumberOf("scsi-t10")});
}

// aws-ebs-csi-driver, pkg/mounter/mount_windows_proxyV1.go: ListDiskIDs; the disk whose SerialNumber contains the
// volume id without its dash (an EBS volume on Nitro is an NVMe controller whose serial is that).
TEST_F(DriverDiskLookup, EbsFindsItsVolumeByTheSerialNumber) {
  std::vector<uint32_t> found;
  for (const auto& [number, ids] : ids_) {
    if (ids.serial_number.find("vol0123456789abcdef0") != std::string::npos) found.push_back(number);
  }
  EXPECT_EQ(found, std::vector<uint32_t>{DiskNumberOf("nvme-no-namespace-id")});
}

// vsphere-csi-driver (pkg/csi/service/osutils/windows_os_utils.go, pkg/csi/service/mounter/mounter_windows.go):
// ListDiskIDs; the disk whose Page83 equals the disk's id. A page 0x83 that starts with an NAA designator gives its
// lowercase hex (the recorded one has 8 bytes, VMware's 16: the rule is the same).
TEST_F(DriverDiskLookup, VsphereFindsItsDiskByThePage83Naa) {
  std::vector<uint32_t> found;
  for (const auto& [number, ids] : ids_) {
    if (ids.page83 == "5000c50015ea71ac") found.push_back(number);
  }
  EXPECT_EQ(found, std::vector<uint32_t>{DiskNumberOf("scsi-naa-lun3")});
}

TEST_F(DriverDiskLookup, EveryDiskIsListedAndDisksWithoutIdentifiersHaveEmptyStrings) {
  EXPECT_EQ(ids_.size(), 6u);
  EXPECT_EQ(ids_.at(DiskNumberOf("virtio-blk-serial")).serial_number, "virtio-disk-serial-1");
  EXPECT_EQ(ids_.at(DiskNumberOf("loop")).page83, "");
  EXPECT_EQ(ids_.at(DiskNumberOf("loop")).serial_number, "");
}

}  // namespace
}  // namespace csi_proxy::disk

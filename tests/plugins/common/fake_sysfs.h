// Fabricated sysfs trees for the code paths this machine's kernel cannot exercise (it has no SCSI, NVMe or virtio
// disks): one SCSI disk (SCSI addresses, VPD pages, the SCSI device state, host scans), and disks recorded from
// real ones in the VM lane. The layout copies what the kernel builds under /sys.
#pragma once

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "build_tree.h"
#include "block_device_scan_linux.h"
#include "temp_dir.h"

namespace csi_proxy::testing {

class FakeScsiDisk {
 public:
  // A disk named `name` with SCSI address `hctl` ("7:0:3:12"), disk number `diskseq` and the given raw VPD pages
  // (empty: the file is absent).
  FakeScsiDisk(const std::string& name, const std::string& hctl, uint64_t diskseq, const std::string& vpd_pg83,
               const std::string& vpd_pg80, uint64_t size_bytes = 1 << 30) {
    namespace fs = std::filesystem;
    const std::string sys = dir_.Sub("sys");
    const std::string host = "host" + hctl.substr(0, hctl.find(':'));
    const std::string target = "target" + hctl.substr(0, hctl.rfind(':'));
    scsi_dir_ = sys + "/devices/platform/" + host + "/" + target + "/" + hctl;
    const std::string block_dir = scsi_dir_ + "/block/" + name;
    fs::create_directories(block_dir);
    fs::create_directories(sys + "/bus/scsi");
    fs::create_directories(sys + "/block");
    fs::create_directories(sys + "/class/block");
    fs::create_directories(sys + "/dev/block");
    fs::create_directories(sys + "/class/scsi_host/" + host);
    fs::create_directories(dir_.Sub("dev"));
    Write(scsi_dir_ + "/state", "running\n");
    Write(scsi_dir_ + "/rescan", "");
    if (!vpd_pg83.empty()) Write(scsi_dir_ + "/vpd_pg83", vpd_pg83);
    if (!vpd_pg80.empty()) Write(scsi_dir_ + "/vpd_pg80", vpd_pg80);
    fs::create_symlink(fs::relative(sys + "/bus/scsi", scsi_dir_), scsi_dir_ + "/subsystem");
    const std::string devno = "240:4242";  // major 240: reserved for local/experimental use, never a real disk
    Write(block_dir + "/dev", devno + "\n");
    Write(block_dir + "/size", std::to_string(size_bytes / 512) + "\n");
    Write(block_dir + "/diskseq", std::to_string(diskseq) + "\n");
    Write(block_dir + "/uevent", "MAJOR=240\nMINOR=4242\nDEVNAME=" + name + "\nDEVTYPE=disk\n");
    fs::create_symlink("../../../" + hctl, block_dir + "/device");
    fs::create_symlink(fs::relative(block_dir, sys + "/block"), sys + "/block/" + name);
    fs::create_symlink(fs::relative(block_dir, sys + "/class/block"), sys + "/class/block/" + name);
    fs::create_symlink(fs::relative(block_dir, sys + "/dev/block"), sys + "/dev/block/" + devno);
    Write(sys + "/class/scsi_host/" + host + "/scan", "");
    host_scan_ = sys + "/class/scsi_host/" + host + "/scan";
    Write(dir_.Sub("dev") + "/" + name, "");  // stands in for the device node (opened and fsync'ed only)
    roots_.sys = sys;
    roots_.dev = dir_.Sub("dev");
  }

  const common::BlockDeviceRoots& roots() const { return roots_; }
  std::string State() const {
    std::string s = Read(scsi_dir_ + "/state");
    if (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
  }
  void SetState(const std::string& state) { Write(scsi_dir_ + "/state", state + "\n"); }
  std::string HostScanWrites() const { return Read(host_scan_); }
  std::string RescanWrites() const { return Read(scsi_dir_ + "/rescan"); }

 private:
  static void Write(const std::string& path, const std::string& data) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
  }
  static std::string Read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  TempDir dir_;
  std::string scsi_dir_;
  std::string host_scan_;
  common::BlockDeviceRoots roots_;
};

// A fabricated sysfs holding disks recorded from real ones (tests/plugins/common/disk_identities/<disk>/, written
// by tests/vm/record-disk-ids.sh): each disk's block directory with the attributes recorded for it, its device
// directory (the recorded device/ attributes, a subsystem link and the recorded device link's name, such as the
// SCSI address 0:0:1:3), and the /sys/block, /sys/class/block and /sys/dev/block links the readers follow.
class RecordedDisks {
 public:
  // The fixture directory of the recorded disk `disk` ("scsi-naa-lun3").
  static std::string Fixture(const std::string& disk) {
    return csi_proxy::testing::SourceDir() + "/tests/plugins/common/disk_identities/" + disk;
  }
  static std::string ReadFixture(const std::string& disk, const std::string& file) {
    std::ifstream in(Fixture(disk) + "/" + file, std::ios::binary);
    std::string s(std::istreambuf_iterator<char>(in), {});
    if (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
  }

  explicit RecordedDisks(const std::vector<std::string>& disks) {
    namespace fs = std::filesystem;
    const std::string sys = dir_.Sub("sys");
    for (const char* d : {"/block", "/class/block", "/dev/block", "/bus"}) fs::create_directories(sys + d);
    fs::create_directories(dir_.Sub("dev"));
    for (const auto& disk : disks) {
      const std::string from = Fixture(disk);
      const std::string name = ReadFixture(disk, "name");
      const std::string device_name = ReadFixture(disk, "device-name");
      const std::string parent = sys + "/devices/" + (device_name.empty() ? "virtual" : "recorded/" + device_name);
      const std::string block = parent + "/block/" + name;
      fs::create_directories(block);
      for (const auto& entry : fs::recursive_directory_iterator(from)) {
        const std::string rel = fs::relative(entry.path(), from).string();
        if (!entry.is_regular_file() || rel == "name" || rel == "device-name" || rel == "device-subsystem") continue;
        const bool of_device = rel.rfind("device/", 0) == 0;
        const std::string to = of_device ? parent + "/" + rel.substr(7) : block + "/" + rel;
        fs::create_directories(fs::path(to).parent_path());
        fs::copy_file(entry.path(), to, fs::copy_options::overwrite_existing);  // namespaces share a controller
      }
      if (!device_name.empty()) {
        const std::string subsystem = sys + "/bus/" + ReadFixture(disk, "device-subsystem");
        fs::create_directories(subsystem);
        if (!fs::is_symlink(parent + "/subsystem"))
          fs::create_symlink(fs::relative(subsystem, parent), parent + "/subsystem");
        fs::create_symlink("../../../" + device_name, block + "/device");
      }
      const std::string devno = ReadFixture(disk, "dev");
      std::ofstream(block + "/uevent") << "DEVNAME=" << name << "\nDEVTYPE=disk\n";
      fs::create_symlink(fs::relative(block, sys + "/block"), sys + "/block/" + name);
      fs::create_symlink(fs::relative(block, sys + "/class/block"), sys + "/class/block/" + name);
      fs::create_symlink(fs::relative(block, sys + "/dev/block"), sys + "/dev/block/" + devno);
      std::ofstream(dir_.Sub("dev") + "/" + name) << "";  // stands in for the device node
    }
    roots_.sys = sys;
    roots_.dev = dir_.Sub("dev");
  }

  const common::BlockDeviceRoots& roots() const { return roots_; }

 private:
  TempDir dir_;
  common::BlockDeviceRoots roots_;
};

// Builds a VPD page from its descriptors: page code, then a 2-byte length, then the bytes.
inline std::string VpdPage(uint8_t page_code, const std::string& body) {
  std::string page;
  page.push_back(0);
  page.push_back(static_cast<char>(page_code));
  page.push_back(static_cast<char>((body.size() >> 8) & 0xff));
  page.push_back(static_cast<char>(body.size() & 0xff));
  return page + body;
}

// One designation descriptor of page 0x83.
inline std::string Designator(uint8_t code_set, uint8_t association, uint8_t type, const std::string& id) {
  std::string d;
  d.push_back(static_cast<char>(code_set & 0x0f));
  d.push_back(static_cast<char>(((association & 0x03) << 4) | (type & 0x0f)));
  d.push_back(0);
  d.push_back(static_cast<char>(id.size()));
  return d + id;
}

}  // namespace csi_proxy::testing

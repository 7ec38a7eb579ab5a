// Block devices as the Linux kernel lists them in sysfs; see block_device_scan_linux.h.
#include "block_device_scan_linux.h"

#include "read_file_linux.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <thread>

#include "disk_identifiers_linux.h"
#include "errno_linux.h"
#include "text.h"

namespace csi_proxy::common {
namespace fs = std::filesystem;

namespace {

std::optional<uint64_t> ReadU64(const std::string& path) {
  auto text = ReadAttribute(path);
  uint64_t v = 0;
  if (!text.ok() || !ParseDecimal(*text, v)) return std::nullopt;
  return v;
}

std::string ReadBinary(const std::string& path, size_t limit = 64 * 1024) {
  auto data = ReadWholeFile(path, {.max_bytes = limit});
  return data.ok() ? std::move(data).value() : std::string();
}

std::string StripNewline(std::string s) {
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

// A kernel device name as it may appear in a request: one path component of ordinary characters.
bool IsPlausibleDeviceName(std::string_view name) {
  if (name.empty() || name.size() > NAME_MAX || name == "." || name == "..") return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
           c == '.' || c == '!' || c == ':';
  });
}

std::string DevnoText(dev_t devno) { return std::to_string(major(devno)) + ":" + std::to_string(minor(devno)); }

}  // namespace

std::optional<dev_t> ParseDevno(std::string_view text) {
  auto colon = text.find(':');
  uint64_t ma = 0, mi = 0;
  if (colon == std::string_view::npos || !ParseDecimal(text.substr(0, colon), ma) ||
      !ParseDecimal(text.substr(colon + 1), mi) || ma > UINT32_MAX || mi > UINT32_MAX) {
    return std::nullopt;
  }
  return makedev(static_cast<unsigned>(ma), static_cast<unsigned>(mi));
}

std::optional<uint32_t> DiskNumberOf(const BlockDevice& device) {
  if (device.diskseq == 0 || device.diskseq > UINT32_MAX) return std::nullopt;
  return static_cast<uint32_t>(device.diskseq);
}

// ---- BlockDevices --------------------------------------------------------------------------------------------

BlockDevices::BlockDevices(BlockDeviceRoots roots) : roots_(std::move(roots)) {}

std::string BlockDevices::SysfsDir(std::string_view name) const {
  return roots_.sys + "/class/block/" + std::string(name);
}

StatusOr<BlockDevice> BlockDevices::Describe(const std::string& name) const {
  const std::string dir = SysfsDir(name);
  std::error_code ec;
  fs::path real = fs::canonical(dir, ec);
  if (ec) return NotFound("the kernel lists no block device named " + QuotePath(name));

  BlockDevice d;
  d.name = name;
  auto dev_text = ReadAttribute(dir + "/dev");
  std::optional<dev_t> devno = dev_text.ok() ? ParseDevno(*dev_text) : std::nullopt;
  if (!devno) return Internal("cannot read " + dir + "/dev");
  d.devno = *devno;
  d.size_bytes = ReadU64(dir + "/size").value_or(0) * 512;
  if (auto number = ReadU64(dir + "/partition")) {
    d.is_partition = true;
    d.partition_number = static_cast<uint32_t>(*number);
    d.start_bytes = ReadU64(dir + "/start").value_or(0) * 512;
    d.disk_name = real.parent_path().filename().string();
  } else {
    d.disk_name = name;
  }
  d.diskseq = ReadU64(roots_.sys + "/block/" + d.disk_name + "/diskseq").value_or(0);

  // The node name comes from uevent's DEVNAME (it differs from the sysfs name for e.g. cciss!c0d0).
  std::string devname = name;
  std::istringstream uevent(ReadBinary(dir + "/uevent", 4096));
  for (std::string line; std::getline(uevent, line);) {
    if (line.rfind("DEVNAME=", 0) == 0) devname = line.substr(8);
  }
  d.path = roots_.dev + "/" + devname;
  return d;
}

StatusOr<std::vector<BlockDevice>> BlockDevices::ListDisks() const {
  std::vector<BlockDevice> disks;
  std::error_code ec;
  fs::directory_iterator it(roots_.sys + "/block", ec);
  if (ec) return Internal("cannot list " + roots_.sys + "/block: " + ec.message());
  for (const auto& entry : it) {
    // Idle devices (unattached loop devices, empty drives) have size 0: one read skips them, before the
    // several reads of Describe(). A node keeps dozens of idle loop devices around.
    if (ReadU64(entry.path().string() + "/size").value_or(0) == 0) continue;
    std::string name = entry.path().filename().string();
    auto d = Describe(name);
    if (!d.ok() || d->is_partition || d->size_bytes == 0 || d->diskseq == 0) continue;
    disks.push_back(std::move(*d));
  }
  std::sort(disks.begin(), disks.end(), [](const auto& a, const auto& b) { return a.diskseq < b.diskseq; });
  return disks;
}

StatusOr<BlockDevice> BlockDevices::DiskByNumber(uint64_t number) const {
  std::error_code ec;
  fs::directory_iterator it(roots_.sys + "/block", ec);
  if (ec) return Internal("cannot list " + roots_.sys + "/block: " + ec.message());
  for (const auto& entry : it) {
    std::string name = entry.path().filename().string();
    if (ReadU64(entry.path().string() + "/diskseq") != number) continue;
    auto d = Describe(name);
    if (d.ok() && !d->is_partition && d->size_bytes > 0) return d;
  }
  return NotFound("no disk with number " + std::to_string(number) +
                  " (disk numbers are the kernel's diskseq; see ListDiskIDs)");
}

StatusOr<BlockDevice> BlockDevices::DeviceByName(std::string_view name) const {
  if (!IsPlausibleDeviceName(name)) return InvalidArgument("not a block device name: " + QuotePath(name));
  return Describe(std::string(name));
}

StatusOr<BlockDevice> BlockDevices::DiskByName(std::string_view name) const {
  auto d = DeviceByName(name);
  if (!d.ok()) return d;
  if (d->is_partition) return FailedPrecondition(d->name + " is a partition, not a whole disk");
  return d;
}

StatusOr<BlockDevice> BlockDevices::DeviceByDevno(dev_t devno) const {
  std::error_code ec;
  fs::path link = fs::read_symlink(roots_.sys + "/dev/block/" + DevnoText(devno), ec);
  if (ec) return NotFound("the kernel lists no block device " + DevnoText(devno));
  return Describe(link.filename().string());
}

StatusOr<BlockDevice> BlockDevices::DeviceOfMount(const MountEntry& mount) const {
  auto device = DeviceByDevno(mount.devno);
  if (device.ok()) return device;
  if (mount.source.rfind(roots_.dev + "/", 0) == 0) {
    if (auto by_source = ResolveVolumeId(mount.source); by_source.ok()) return by_source;
  }
  return NotFound("the mount at " + QuotePath(mount.target) + " (" + mount.fs_type + ") has no block device");
}

StatusOr<DeviceNode> ResolveDeviceNode(const BlockDeviceRoots& roots, std::string_view volume_id) {
  if (volume_id.empty()) return InvalidArgument("volume id is empty");
  const std::string prefix = roots.dev + "/";
  if (volume_id.find('\0') != std::string_view::npos || volume_id.size() >= PATH_MAX ||
      volume_id.substr(0, prefix.size()) != prefix) {
    return InvalidArgument("volume id " + QuotePath(volume_id) + " is not a device path under " + prefix +
                           " (volume ids look like /dev/sdb1; see ListVolumesOnDisk)");
  }
  const std::string id(volume_id);
  char resolved[PATH_MAX];
  if (realpath(id.c_str(), resolved) == nullptr) {
    int err = errno;
    if (err == ENOENT || err == ENOTDIR) return NotFound("no device " + QuotePath(id));
    return InvalidArgument(ErrnoMessage("volume id " + QuotePath(id), err));
  }
  char dev_root[PATH_MAX];
  if (realpath(roots.dev.c_str(), dev_root) == nullptr) return Internal(ErrnoMessage(roots.dev, errno));
  const std::string resolved_path = resolved;
  const std::string dev_prefix = std::string(dev_root) + "/";
  if (resolved_path.rfind(dev_prefix, 0) != 0) {
    return InvalidArgument("volume id " + QuotePath(id) + " leads outside " + prefix);
  }
  struct stat st {};
  if (stat(resolved, &st) != 0) return NotFound(ErrnoMessage(QuotePath(id), errno));
  if (!S_ISBLK(st.st_mode)) return InvalidArgument("volume id " + QuotePath(id) + " is not a block device");
  return DeviceNode{resolved_path, st.st_rdev};
}

void PreferKernelNode(BlockDevice& device, const DeviceNode& node) {
  struct stat canonical {};
  if (stat(device.path.c_str(), &canonical) != 0 || !S_ISBLK(canonical.st_mode) || canonical.st_rdev != node.devno) {
    device.path = node.path;
  }
}

StatusOr<BlockDevice> BlockDevices::ResolveVolumeId(std::string_view volume_id) const {
  CSI_PROXY_ASSIGN_OR_RETURN(auto node, ResolveDeviceNode(roots_, volume_id));
  CSI_PROXY_ASSIGN_OR_RETURN(auto device, DeviceByDevno(node.devno));
  PreferKernelNode(device, node);
  return device;
}

StatusOr<std::vector<BlockDevice>> BlockDevices::PartitionsOf(const BlockDevice& disk) const {
  std::vector<BlockDevice> parts;
  std::error_code ec;
  fs::directory_iterator it(roots_.sys + "/block/" + disk.name, ec);
  if (ec) return NotFound("disk " + disk.name + " has disappeared");
  for (const auto& entry : it) {
    if (!fs::exists(entry.path() / "partition", ec)) continue;
    auto p = Describe(entry.path().filename().string());
    if (p.ok() && p->is_partition) parts.push_back(std::move(*p));
  }
  std::sort(parts.begin(), parts.end(),
            [](const auto& a, const auto& b) { return a.partition_number < b.partition_number; });
  return parts;
}

StatusOr<BlockDevice> BlockDevices::DiskOf(const BlockDevice& device) const {
  if (!device.is_partition) return device;
  return Describe(device.disk_name);
}

bool BlockDevices::DevIsDevtmpfs() const {
  auto mounts = ReadMountTable();
  if (!mounts.ok()) return false;
  for (const auto& m : *mounts) {
    if (m.target == roots_.dev && m.fs_type == "devtmpfs") return true;
  }
  return false;
}

StatusOr<BlockDevice> BlockDevices::WaitForPartition(const BlockDevice& disk, uint32_t number,
                                                     std::chrono::milliseconds timeout) const {
  const auto start = std::chrono::steady_clock::now();
  std::optional<bool> devtmpfs;
  for (;;) {
    CSI_PROXY_ASSIGN_OR_RETURN(auto parts, PartitionsOf(disk));
    auto it =
        std::find_if(parts.begin(), parts.end(), [&](const BlockDevice& p) { return p.partition_number == number; });
    const auto waited = std::chrono::steady_clock::now() - start;
    if (it != parts.end()) {
      struct stat st {};
      if (stat(it->path.c_str(), &st) == 0 && S_ISBLK(st.st_mode) && st.st_rdev == it->devno) return *it;
      // devtmpfs creates the node itself within moments; without it (or if it does not), create it here.
      if (!devtmpfs) devtmpfs = DevIsDevtmpfs();
      if (!*devtmpfs || waited > std::chrono::seconds(2)) {
        if (lstat(it->path.c_str(), &st) == 0) unlink(it->path.c_str());  // a stale node of another device
        if (mknod(it->path.c_str(), S_IFBLK | 0660, it->devno) != 0 && errno != EEXIST) {
          return Internal(ErrnoMessage("mknod " + it->path, errno));
        }
        continue;
      }
    }
    if (waited > timeout) {
      return DeadlineExceeded("partition " + std::to_string(number) + " of " + disk.name +
                              " did not appear in sysfs within " + std::to_string(timeout.count()) + " ms");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::optional<std::string> BlockDevices::ScsiDeviceDir(const BlockDevice& disk) const {
  std::string device = roots_.sys + "/block/" + disk.name + "/device";
  std::error_code ec;
  if (fs::read_symlink(device + "/subsystem", ec).filename() != "scsi" || ec) return std::nullopt;
  return device;
}

std::optional<ScsiAddress> BlockDevices::ScsiAddressOf(const BlockDevice& disk) const {
  auto device = ScsiDeviceDir(disk);
  if (!device) return std::nullopt;
  std::error_code ec;
  fs::path real = fs::canonical(*device, ec);
  if (ec) return std::nullopt;
  return ParseScsiAddress(real.filename().string());
}

DiskIdentifiers BlockDevices::IdentifiersOf(const BlockDevice& disk) const {
  const std::string dir = SysfsDir(disk.name) + "/";
  return ReadDiskIdentifiers([&](const char* attribute, bool raw) -> std::optional<std::string> {
    auto data = ReadWholeFile(dir + attribute, {.max_bytes = 64 * 1024});
    if (!data.ok()) return std::nullopt;
    return raw ? std::move(*data) : StripNewline(std::move(*data));
  });
}

std::optional<std::string> BlockDevices::ScsiStatePath(const BlockDevice& disk) const {
  auto device = ScsiDeviceDir(disk);
  std::error_code ec;
  if (!device || !fs::exists(*device + "/state", ec)) return std::nullopt;
  return *device + "/state";
}

std::vector<std::string> BlockDevices::HoldersOf(const BlockDevice& device) const {
  std::vector<std::string> holders;
  std::error_code ec;
  fs::directory_iterator it(SysfsDir(device.name) + "/holders", ec);
  if (ec) return holders;
  for (const auto& entry : it) holders.push_back(entry.path().filename().string());
  std::sort(holders.begin(), holders.end());
  return holders;
}

std::optional<std::string> BlockDevices::DescribeUse(const BlockDevice& device,
                                                     const std::vector<MountEntry>& mounts) const {
  std::vector<BlockDevice> devices = {device};
  if (!device.is_partition) {
    if (auto parts = PartitionsOf(device); parts.ok()) devices.insert(devices.end(), parts->begin(), parts->end());
  }
  // Swap devices, by device number (names in /proc/swaps may be any alias).
  std::vector<dev_t> swaps;
  auto swaps_text = ReadWholeFile("/proc/swaps");
  std::istringstream swap_list(swaps_text.ok() ? *swaps_text : std::string());
  std::string line;
  std::getline(swap_list, line);  // header
  while (std::getline(swap_list, line)) {
    std::string path = line.substr(0, line.find_first_of(" \t"));
    struct stat st {};
    if (stat(path.c_str(), &st) == 0 && S_ISBLK(st.st_mode)) swaps.push_back(st.st_rdev);
  }
  for (const auto& d : devices) {
    if (auto m = MountsOfDevice(mounts, d); !m.empty()) return d.path + " is mounted at " + m.front().target;
    if (auto h = HoldersOf(d); !h.empty()) return d.path + " is held by " + h.front() + " (device-mapper or md)";
    if (std::find(swaps.begin(), swaps.end(), d.devno) != swaps.end()) return d.path + " is in use as swap";
  }
  return std::nullopt;
}

// ---- Mounts of a device --------------------------------------------------------------------------------------

bool IsMountOf(const MountEntry& mount, const BlockDevice& device) {
  return mount.devno == device.devno || (!mount.source.empty() && mount.source == device.path);
}

std::vector<MountEntry> MountsOfDevice(const std::vector<MountEntry>& mounts, const BlockDevice& device) {
  std::vector<MountEntry> result;
  for (const auto& m : mounts) {
    if (IsMountOf(m, device)) result.push_back(m);
  }
  return result;
}

StatusOr<std::string> ReadAttribute(const std::string& path) {
  auto data = ReadWholeFile(path);
  if (!data.ok()) return NotFound("cannot read " + path);
  return data->substr(0, data->find('\n'));
}

}  // namespace csi_proxy::common

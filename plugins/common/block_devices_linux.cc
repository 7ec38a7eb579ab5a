// Block devices as the Linux kernel lists them: sysfs enumeration, libblkid probes, libmount's mount table,
// disk locking and the BLKPG/BLKRRPART ioctls. See block_devices_linux.h.
#include "block_devices_linux.h"

#include <blkid/blkid.h>
#include <fcntl.h>
#include <libmount/libmount.h>
#include <linux/blkpg.h>
#include <linux/fs.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

namespace csi_proxy::common {
namespace fs = std::filesystem;

namespace {

bool ParseU64(std::string_view text, uint64_t& out) {
  if (text.empty() || text.size() > 20) return false;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    uint64_t next = v * 10 + static_cast<uint64_t>(c - '0');
    if (next / 10 != v) return false;  // overflow
    v = next;
  }
  out = v;
  return true;
}

std::optional<uint64_t> ReadU64(const std::string& path) {
  auto text = ReadAttribute(path);
  uint64_t v = 0;
  if (!text.ok() || !ParseU64(*text, v)) return std::nullopt;
  return v;
}

std::optional<dev_t> ParseDevno(std::string_view text) {
  auto colon = text.find(':');
  uint64_t ma = 0, mi = 0;
  if (colon == std::string_view::npos || !ParseU64(text.substr(0, colon), ma) ||
      !ParseU64(text.substr(colon + 1), mi) || ma > UINT32_MAX || mi > UINT32_MAX) {
    return std::nullopt;
  }
  return makedev(static_cast<unsigned>(ma), static_cast<unsigned>(mi));
}

std::string ReadBinary(const std::string& path, size_t limit = 64 * 1024) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::string data(limit, '\0');
  in.read(data.data(), static_cast<std::streamsize>(limit));
  data.resize(static_cast<size_t>(in.gcount()));
  return data;
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

void SleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

struct ProbeDeleter {
  void operator()(blkid_probe pr) const { blkid_free_probe(pr); }
};
using ProbePtr = std::unique_ptr<std::remove_pointer_t<blkid_probe>, ProbeDeleter>;

StatusOr<ProbePtr> NewProbe(const std::string& path) {
  errno = 0;
  blkid_probe pr = blkid_new_probe_from_filename(path.c_str());
  if (pr == nullptr) {
    int err = errno != 0 ? errno : EIO;
    if (err == ENOENT) return NotFound(ErrnoMessage("probe " + path, err));
    return Internal(ErrnoMessage("probe " + path, err));
  }
  return ProbePtr(pr);
}

std::string LookupValue(blkid_probe pr, const char* name) {
  const char* data = nullptr;
  size_t len = 0;
  if (blkid_probe_lookup_value(pr, name, &data, &len) != 0 || data == nullptr) return {};
  std::string value(data, len);
  while (!value.empty() && value.back() == '\0') value.pop_back();
  return value;
}

}  // namespace

// ---- Pure parsing ------------------------------------------------------------------------------------------

std::optional<ScsiAddress> ParseScsiAddress(std::string_view text) {
  uint64_t parts[4];
  for (int i = 0; i < 4; ++i) {
    auto colon = text.find(':');
    std::string_view field = i < 3 ? text.substr(0, colon) : text;
    if ((i < 3 && colon == std::string_view::npos) || !ParseU64(field, parts[i])) return std::nullopt;
    if (i < 3) text.remove_prefix(colon + 1);
  }
  if (parts[0] > UINT32_MAX || parts[1] > UINT32_MAX || parts[2] > UINT32_MAX) return std::nullopt;
  return ScsiAddress{static_cast<uint32_t>(parts[0]), static_cast<uint32_t>(parts[1]), static_cast<uint32_t>(parts[2]),
                     parts[3]};
}

std::string SelectPage83Identifier(std::string_view page) {
  if (page.size() < 4) return {};
  auto byte = [&](size_t i) { return static_cast<uint8_t>(page[i]); };
  size_t end = std::min(page.size(), size_t{4} + ((size_t{byte(2)} << 8) | byte(3)));
  size_t off = 4;
  while (off + 4 <= end) {
    uint8_t code_set = byte(off) & 0x0f;
    uint8_t association = (byte(off + 1) >> 4) & 0x03;
    size_t length = byte(off + 3);
    if (off + 4 + length > end) break;
    std::string_view designator = page.substr(off + 4, length);
    if (association == 0 && code_set == 1) {
      static constexpr char kHex[] = "0123456789abcdef";
      std::string hex;
      for (unsigned char c : designator) {
        hex.push_back(kHex[c >> 4]);
        hex.push_back(kHex[c & 0x0f]);
      }
      return hex;
    }
    if (association == 0 && code_set == 2) return std::string(designator);
    off += 4 + length;
  }
  return {};
}

std::string ParseVpdSerial(std::string_view page) {
  if (page.size() < 4) return {};
  size_t length = (size_t{static_cast<uint8_t>(page[2])} << 8) | static_cast<uint8_t>(page[3]);
  return std::string(page.substr(4, std::min(length, page.size() - 4)));
}

StatusOr<uint32_t> ParseDiskNumber(std::string_view text) {
  uint64_t value = 0;
  if (text.empty()) return InvalidArgument("disk id is empty");
  if (text.size() > 10 || !ParseU64(text, value) || value > UINT32_MAX) {
    return InvalidArgument("disk id " + QuotePath(text) + " is not a disk number (a decimal number, see ListDiskIDs)");
  }
  return static_cast<uint32_t>(value);
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

StatusOr<BlockDevice> BlockDevices::ResolveVolumeId(std::string_view volume_id) const {
  if (volume_id.empty()) return InvalidArgument("volume id is empty");
  const std::string prefix = roots_.dev + "/";
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
  if (realpath(roots_.dev.c_str(), dev_root) == nullptr) return Internal(ErrnoMessage(roots_.dev, errno));
  const std::string resolved_path = resolved;
  const std::string dev_prefix = std::string(dev_root) + "/";
  if (resolved_path.rfind(dev_prefix, 0) != 0) {
    return InvalidArgument("volume id " + QuotePath(id) + " leads outside " + prefix);
  }
  struct stat st {};
  if (stat(resolved, &st) != 0) return NotFound(ErrnoMessage(QuotePath(id), errno));
  if (!S_ISBLK(st.st_mode)) return InvalidArgument("volume id " + QuotePath(id) + " is not a block device");
  auto device = DeviceByDevno(st.st_rdev);
  if (!device.ok()) return device.status();
  // Prefer the kernel's own node name; keep the resolved node if that one is missing or different.
  struct stat canonical {};
  if (stat(device->path.c_str(), &canonical) != 0 || !S_ISBLK(canonical.st_mode) || canonical.st_rdev != st.st_rdev) {
    device->path = resolved_path;
  }
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
    auto parts = PartitionsOf(disk);
    if (!parts.ok()) return parts.status();
    auto it =
        std::find_if(parts->begin(), parts->end(), [&](const BlockDevice& p) { return p.partition_number == number; });
    const auto waited = std::chrono::steady_clock::now() - start;
    if (it != parts->end()) {
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
    SleepMs(10);
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
  const std::string block = roots_.sys + "/block/" + disk.name;
  DiskIdentifiers ids;
  ids.page83 = SelectPage83Identifier(ReadBinary(block + "/device/vpd_pg83"));
  std::error_code ec;
  if (fs::exists(block + "/device/vpd_pg80", ec)) {
    ids.serial_number = ParseVpdSerial(ReadBinary(block + "/device/vpd_pg80"));
  } else if (fs::exists(block + "/device/serial", ec)) {  // NVMe controllers
    ids.serial_number = StripNewline(ReadBinary(block + "/device/serial", 4096));
  } else if (fs::exists(block + "/serial", ec)) {  // virtio-blk
    ids.serial_number = StripNewline(ReadBinary(block + "/serial", 4096));
  }
  return ids;
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
  std::ifstream swap_list("/proc/swaps");
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

namespace {
// The kernel represents an extended (container) partition by its first 1 KiB only.
constexpr uint64_t kExtendedPartitionKernelSize = 1024;
}  // namespace

bool BlockDevices::KernelPartitionsMatchTable(const BlockDevice& disk) const {
  auto entries = ReadPartitionEntries(disk.path);
  auto kernel = PartitionsOf(disk);
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

Status BlockDevices::SyncKernelPartitions(const BlockDevice& disk, int disk_fd, bool remove_vanished) const {
  auto entries = ReadPartitionEntries(disk.path);
  if (!entries.ok()) return entries.status();
  auto kernel = PartitionsOf(disk);
  if (!kernel.ok()) return kernel.status();
  auto mounts = ReadMountTable();
  if (!mounts.ok()) return mounts.status();
  Status first_error;
  auto note = [&](Status s) {
    if (!s.ok() && first_error.ok()) first_error = s.WithContext(disk.path);
  };
  auto entry_of = [&](uint32_t number) -> const PartitionEntry* {
    for (const auto& e : *entries) {
      if (e.number == number) return &e;
    }
    return nullptr;
  };
  std::vector<uint32_t> present;
  for (const auto& k : *kernel) {
    const PartitionEntry* e = entry_of(k.partition_number);
    if (e != nullptr && e->start_bytes == k.start_bytes) {
      present.push_back(k.partition_number);
      if (!e->is_extended && e->size_bytes != k.size_bytes) {
        note(KernelResizePartition(disk_fd, e->number, e->start_bytes, e->size_bytes));
      }
      continue;
    }
    if (!remove_vanished || DescribeUse(k, *mounts)) {  // gone from the table but kept (in use, or asked to)
      present.push_back(k.partition_number);
      continue;
    }
    note(KernelDeletePartition(disk_fd, k.partition_number));
  }
  for (const auto& e : *entries) {
    if (std::find(present.begin(), present.end(), e.number) != present.end()) continue;
    note(KernelAddPartition(disk_fd, e.number, e.start_bytes,
                            e.is_extended ? std::min(e.size_bytes, kExtendedPartitionKernelSize) : e.size_bytes));
  }
  return first_error;
}

// ---- libblkid --------------------------------------------------------------------------------------------------

StatusOr<Signatures> ProbeSignatures(const std::string& device_path) {
  auto pr = NewProbe(device_path);
  if (!pr.ok()) return pr.status();
  blkid_probe p = pr->get();
  blkid_probe_enable_superblocks(p, 1);
  blkid_probe_set_superblocks_flags(p, BLKID_SUBLKS_TYPE | BLKID_SUBLKS_USAGE | BLKID_SUBLKS_UUID | BLKID_SUBLKS_LABEL);
  blkid_probe_enable_partitions(p, 1);
  Signatures sig;
  int rc = blkid_do_safeprobe(p);
  if (rc == -2) {
    sig.ambivalent = true;
    return sig;
  }
  if (rc < 0) return Internal("libblkid could not probe " + device_path);
  if (rc == 1) return sig;  // nothing found
  sig.fs_type = LookupValue(p, "TYPE");
  sig.usage = LookupValue(p, "USAGE");
  sig.uuid = LookupValue(p, "UUID");
  sig.label = LookupValue(p, "LABEL");
  sig.pt_type = LookupValue(p, "PTTYPE");
  return sig;
}

std::string DescribeSignatures(const Signatures& sig) {
  if (sig.ambivalent) return "several conflicting signatures";
  if (!sig.fs_type.empty()) {
    std::string text =
        sig.usage == "filesystem" ? "a filesystem of type " + sig.fs_type : "a signature of type " + sig.fs_type;
    if (!sig.uuid.empty()) text += " (UUID " + sig.uuid + ")";
    return text;
  }
  if (!sig.pt_type.empty()) return "a partition table of type " + sig.pt_type;
  return "nothing";
}

StatusOr<std::vector<PartitionEntry>> ReadPartitionEntries(const std::string& disk_path) {
  auto pr = NewProbe(disk_path);
  if (!pr.ok()) return pr.status();
  blkid_probe p = pr->get();
  blkid_probe_enable_superblocks(p, 0);
  blkid_probe_enable_partitions(p, 1);
  blkid_probe_set_partitions_flags(p, BLKID_PARTS_ENTRY_DETAILS);
  std::vector<PartitionEntry> entries;
  blkid_partlist list = blkid_probe_get_partitions(p);
  if (list == nullptr) return entries;  // no partition table
  int n = blkid_partlist_numof_partitions(list);
  for (int i = 0; i < n; ++i) {
    blkid_partition part = blkid_partlist_get_partition(list, i);
    if (part == nullptr) continue;
    PartitionEntry e;
    e.number = static_cast<uint32_t>(blkid_partition_get_partno(part));
    if (const char* type = blkid_partition_get_type_string(part)) {
      e.type = type;
      std::transform(e.type.begin(), e.type.end(), e.type.begin(), [](unsigned char c) { return std::tolower(c); });
    } else {
      char buf[16];
      std::snprintf(buf, sizeof buf, "0x%x", blkid_partition_get_type(part));
      e.type = buf;
    }
    e.is_extended = blkid_partition_is_extended(part) != 0;
    e.start_bytes = static_cast<uint64_t>(blkid_partition_get_start(part)) * 512;  // libblkid counts 512-byte units
    e.size_bytes = static_cast<uint64_t>(blkid_partition_get_size(part)) * 512;
    entries.push_back(std::move(e));
  }
  return entries;
}

// ---- libmount --------------------------------------------------------------------------------------------------

StatusOr<std::vector<MountEntry>> ReadMountTable() {
  std::unique_ptr<libmnt_table, void (*)(libmnt_table*)> table(mnt_new_table(), mnt_unref_table);
  if (!table) return Internal("libmount: out of memory");
  if (int rc = mnt_table_parse_file(table.get(), "/proc/self/mountinfo"); rc != 0) {
    return Internal(ErrnoMessage("cannot parse /proc/self/mountinfo", rc < 0 ? -rc : EIO));
  }
  std::unique_ptr<libmnt_iter, void (*)(libmnt_iter*)> iter(mnt_new_iter(MNT_ITER_FORWARD), mnt_free_iter);
  std::vector<MountEntry> mounts;
  libmnt_fs* fs = nullptr;
  auto str = [](const char* s) { return s ? std::string(s) : std::string(); };
  while (mnt_table_next_fs(table.get(), iter.get(), &fs) == 0) {
    MountEntry m;
    m.id = mnt_fs_get_id(fs);
    m.parent_id = mnt_fs_get_parent_id(fs);
    m.devno = mnt_fs_get_devno(fs);
    m.root = str(mnt_fs_get_root(fs));
    m.target = str(mnt_fs_get_target(fs));
    m.source = str(mnt_fs_get_source(fs));
    m.fs_type = str(mnt_fs_get_fstype(fs));
    mounts.push_back(std::move(m));
  }
  return mounts;
}

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

// ---- fds, locks, ioctls --------------------------------------------------------------------------------------

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
    SleepMs(20);
  }
  return fd;
}

Status RereadPartitionTable(int disk_fd) {
  if (ioctl(disk_fd, BLKRRPART) != 0) return Internal(ErrnoMessage("BLKRRPART", errno));
  return Status::Ok();
}

namespace {
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

Status KernelAddPartition(int disk_fd, uint32_t number, uint64_t start_bytes, uint64_t size_bytes) {
  return Blkpg(disk_fd, BLKPG_ADD_PARTITION, number, start_bytes, size_bytes, "BLKPG add");
}

Status KernelResizePartition(int disk_fd, uint32_t number, uint64_t start_bytes, uint64_t size_bytes) {
  return Blkpg(disk_fd, BLKPG_RESIZE_PARTITION, number, start_bytes, size_bytes, "BLKPG resize");
}

Status KernelDeletePartition(int disk_fd, uint32_t number) {
  return Blkpg(disk_fd, BLKPG_DEL_PARTITION, number, 0, 0, "BLKPG delete");
}

StatusOr<std::string> ReadAttribute(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read " + path);
  std::string value;
  std::getline(in, value);
  return value;
}

std::string ErrnoMessage(std::string_view what, int err) { return std::string(what) + ": " + std::strerror(err); }

}  // namespace csi_proxy::common

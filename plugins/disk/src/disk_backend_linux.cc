// The disk group on Linux; see disk_backend_linux.h.
#include "disk_backend_linux.h"

#include <fcntl.h>
#include <libfdisk/libfdisk.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <memory>

#include "block_probe_linux.h"
#include "errno_linux.h"
#include "mount_table_linux.h"
#include "partition_table_linux.h"
#include "text.h"

namespace csi_proxy::disk {
namespace fs = std::filesystem;
using common::BlockDevice;

namespace {

constexpr auto kPartitionAppearTimeout = std::chrono::seconds(10);

bool HasDataPartition(const std::vector<common::PartitionEntry>& entries) {
  return std::any_of(entries.begin(), entries.end(), [](const common::PartitionEntry& e) {
    return !e.is_extended && e.type != common::kMicrosoftReservedGuid;
  });
}

std::string DiskText(uint32_t number, const BlockDevice& disk) {
  return "disk " + std::to_string(number) + " (" + disk.path + ")";
}

Status WriteAttribute(const std::string& path, const std::string& value) {
  int fd = open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);  // O_TRUNC: ignored by sysfs
  if (fd < 0) return Internal(common::ErrnoMessage("open " + path, errno));
  ssize_t n = write(fd, value.data(), value.size());
  int err = errno;
  close(fd);
  if (n != static_cast<ssize_t>(value.size())) return Internal(common::ErrnoMessage("write " + path, err));
  return Status::Ok();
}

struct FdiskContextDeleter {
  void operator()(fdisk_context* cxt) const { fdisk_unref_context(cxt); }
};
struct FdiskPartitionDeleter {
  void operator()(fdisk_partition* pa) const { fdisk_unref_partition(pa); }
};
struct FdiskTypeDeleter {
  void operator()(fdisk_parttype* t) const { fdisk_unref_parttype(t); }
};

}  // namespace

LinuxDiskBackend::LinuxDiskBackend(LinuxDiskOptions options)
    : options_(std::move(options)),
      devices_(options_.roots),
      inventory_(options_.roots, options_.inventory),
      offline_(options_.state_dir, options_.roots) {}

StatusOr<std::map<uint32_t, DiskLocation>> LinuxDiskBackend::ListDiskLocations() {
  CSI_PROXY_ASSIGN_OR_RETURN(auto disks, inventory_.ListDisks());
  std::map<uint32_t, DiskLocation> locations;
  for (const auto& disk : *disks) {
    auto number = common::DiskNumberOf(disk.device);  // a disk that cannot be named is left out
    if (!number) continue;
    const auto& address = disk.scsi_address;
    if (!address) continue;
    locations[*number] = DiskLocation{std::to_string(address->host), std::to_string(address->channel),
                                      std::to_string(address->target), std::to_string(address->lun)};
  }
  return locations;
}

StatusOr<std::map<uint32_t, DiskIds>> LinuxDiskBackend::ListDiskIds() {
  CSI_PROXY_ASSIGN_OR_RETURN(auto disks, inventory_.ListDisks());
  std::map<uint32_t, DiskIds> ids;
  for (const auto& disk : *disks) {
    auto number = common::DiskNumberOf(disk.device);
    if (!number) continue;
    ids[*number] = DiskIds{disk.ids.page83, disk.ids.serial_number};
  }
  return ids;
}

StatusOr<uint32_t> LinuxDiskBackend::FindDiskByPage83(const std::string& page83) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto disks, inventory_.ListDisks());
  for (const auto& disk : *disks) {
    auto number = common::DiskNumberOf(disk.device);
    if (number && disk.ids.page83 == page83) return *number;
  }
  return NotFound("no disk has the page 0x83 identifier " + common::QuotePath(page83));
}

StatusOr<int64_t> LinuxDiskBackend::GetDiskSize(uint32_t disk_number) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto disk, inventory_.DiskByNumber(disk_number));
  return static_cast<int64_t>(disk.device.size_bytes);
}

Status LinuxDiskBackend::PartitionDisk(uint32_t disk_number) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto entry, inventory_.DiskByNumber(disk_number));
  const BlockDevice& disk = entry.device;
  const std::string what = DiskText(disk_number, disk);

  // Nothing is written to an offline disk. One that has partitions needs nothing, which is success: GCE's, EBS's
  // and vSphere's stage call PartitionDisk before they bring the disk online again (an offline SCSI disk's table
  // cannot even be read, so the kernel's partitions decide).
  CSI_PROXY_ASSIGN_OR_RETURN(auto offline, offline_.OfflineState(entry));
  if (offline) {
    auto parts = inventory_.PartitionsOf(disk);
    if (parts.ok() && !parts->empty()) return Status::Ok();
    return FailedPrecondition(what + " is " + *offline + "; bring it online with SetDiskState before partitioning it");
  }

  // Idempotent: a disk that already has a partition (other than Microsoft Reserved) is left as it is.
  auto entries = common::ReadPartitionEntries(disk.path);
  if (!entries.ok()) return entries.status().WithContext("reading the partition table of " + what);
  if (HasDataPartition(*entries)) return Status::Ok();

  if (auto partscan = common::ReadAttribute(devices_.SysfsDir(disk.name) + "/partscan");
      partscan.ok() && *partscan == "0") {
    return FailedPrecondition(what +
                              ": the kernel does not scan partitions on this device (for a loop device: "
                              "attach it with partition scanning)");
  }
  CSI_PROXY_ASSIGN_OR_RETURN(auto mounts, common::ReadMountTable());
  if (auto use = devices_.DescribeUse(disk, mounts)) {
    return FailedPrecondition(what + " is in use: " + *use + "; refusing to partition it");
  }

  // Exclusive open (no mount can start meanwhile) plus the udev-convention lock on the whole disk.
  auto fd = common::OpenAndLockDisk(disk.path, O_RDWR | O_EXCL, /*exclusive=*/true);
  if (!fd.ok()) return fd.status().WithContext("partitioning " + what);

  // Look again now that nobody else can change it.
  entries = common::ReadPartitionEntries(disk.path);
  if (!entries.ok()) return entries.status().WithContext("reading the partition table of " + what);
  if (HasDataPartition(*entries)) return Status::Ok();
  auto sig = common::ProbeSignatures(disk.path);
  if (!sig.ok()) return sig.status().WithContext("probing " + what);
  if (sig->ambivalent) {
    return FailedPrecondition(what + " holds several conflicting signatures; refusing to partition it");
  }
  if (!sig->fs_type.empty()) {
    return FailedPrecondition(what + " holds " + common::DescribeSignatures(*sig) +
                              " on the whole disk; refusing to partition it");
  }

  uint32_t number = 0;
  uint64_t start = 0, size = 0;
  CSI_PROXY_RETURN_IF_ERROR(
      WritePartitionTable(disk, fd->get(), number, start, size).WithContext("partitioning " + what));
  if (fsync(fd->get()) != 0) return Internal(common::ErrnoMessage("fsync " + disk.path, errno));
  // Drop the disk's cached pages (libfdisk wiped the new partition's first sectors through them): the partition
  // has a page cache of its own, and a later write through the disk must not write those stale pages back over
  // what was written through the partition. A whole-disk re-read (BLKRRPART) used to do this as a side effect.
  if (ioctl(fd->get(), BLKFLSBUF, 0) != 0) return Internal(common::ErrnoMessage("BLKFLSBUF " + disk.path, errno));

  // Tell the kernel with BLKPG, partition by partition, not with a whole-disk re-read (BLKRRPART drops every
  // partition device and adds them back: a call in between would miss them). The kernel has the new partition
  // (and announced it) when the ioctl returns; its device node may come a moment later, so wait for that too.
  if (!common::KernelPartitionsMatchTable(devices_, disk)) {
    CSI_PROXY_RETURN_IF_ERROR(
        common::SyncKernelPartitions(devices_, disk, fd->get(), /*remove_vanished=*/true).WithContext(what));
  }
  auto part = devices_.WaitForPartition(disk, number, kPartitionAppearTimeout);
  return part.ok() ? Status::Ok() : part.status().WithContext(what);
}

Status LinuxDiskBackend::WritePartitionTable(const BlockDevice& disk, int disk_fd, uint32_t& partition_number,
                                             uint64_t& start_bytes, uint64_t& size_bytes) {
  std::unique_ptr<fdisk_context, FdiskContextDeleter> cxt(fdisk_new_context());
  if (!cxt) return Internal("libfdisk: out of memory");
  fdisk_disable_dialogs(cxt.get(), 1);
  // The fd stays ours: libfdisk does not close a device assigned by descriptor.
  if (int rc = fdisk_assign_device_by_fd(cxt.get(), disk_fd, disk.path.c_str(), 0); rc < 0) {
    return Internal(common::ErrnoMessage("libfdisk cannot read " + disk.path, -rc));
  }
  std::string type_text;
  if (!fdisk_has_label(cxt.get())) {
    if (int rc = fdisk_create_disklabel(cxt.get(), "gpt"); rc < 0) {
      return Internal(common::ErrnoMessage("libfdisk cannot create a GPT", -rc));
    }
  }
  if (fdisk_is_label(cxt.get(), GPT)) {
    type_text = options_.gpt_partition_type;
  } else if (fdisk_is_label(cxt.get(), DOS)) {
    type_text = "83";  // Linux
  } else {
    return FailedPrecondition("it has a partition table of a kind this server does not write (only GPT and dos)");
  }
  fdisk_label* label = fdisk_get_label(cxt.get(), nullptr);
  std::unique_ptr<fdisk_parttype, FdiskTypeDeleter> type(fdisk_label_parse_parttype(label, type_text.c_str()));
  if (!type) return Internal("libfdisk does not know the partition type " + type_text);

  std::unique_ptr<fdisk_partition, FdiskPartitionDeleter> pa(fdisk_new_partition());
  if (!pa) return Internal("libfdisk: out of memory");
  fdisk_partition_start_follow_default(pa.get(), 1);
  fdisk_partition_end_follow_default(pa.get(), 1);
  fdisk_partition_partno_follow_default(pa.get(), 1);
  fdisk_partition_set_type(pa.get(), type.get());
  size_t partno = 0;
  if (int rc = fdisk_add_partition(cxt.get(), pa.get(), &partno); rc < 0) {
    return Internal(common::ErrnoMessage("libfdisk cannot add a partition", -rc));
  }
  if (int rc = fdisk_write_disklabel(cxt.get()); rc < 0) {
    return Internal(common::ErrnoMessage("libfdisk cannot write the partition table", -rc));
  }
  fdisk_partition* written = nullptr;
  if (int rc = fdisk_get_partition(cxt.get(), partno, &written); rc < 0) {
    return Internal(common::ErrnoMessage("libfdisk lost the new partition", -rc));
  }
  std::unique_ptr<fdisk_partition, FdiskPartitionDeleter> written_owner(written);
  const uint64_t sector = fdisk_get_sector_size(cxt.get());
  partition_number = static_cast<uint32_t>(partno + 1);
  start_bytes = fdisk_partition_get_start(written) * sector;
  size_bytes = fdisk_partition_get_size(written) * sector;
  fdisk_deassign_device(cxt.get(), /*nosync=*/1);
  return Status::Ok();
}

Status LinuxDiskBackend::Rescan() {
  // SCSI hosts (including iSCSI sessions) look for new LUNs; machines without SCSI simply have none.
  std::error_code ec;
  for (fs::directory_iterator it(options_.roots.sys + "/class/scsi_host", ec), end; !ec && it != end;
       it.increment(ec)) {
    (void)WriteAttribute(it->path().string() + "/scan", "- - -");  // a host that cannot scan is not an error
  }
  CSI_PROXY_ASSIGN_OR_RETURN(auto disks, devices_.ListDisks());
  CSI_PROXY_ASSIGN_OR_RETURN(auto mounts, common::ReadMountTable());
  for (const auto& disk : disks) {
    // SCSI disks re-read their capacity; loop devices already report a changed capacity.
    const std::string rescan = options_.roots.sys + "/block/" + disk.name + "/device/rescan";
    if (fs::exists(rescan, ec)) (void)WriteAttribute(rescan, "1");

    // Bring the kernel's partitions in line with the partition table, only where they differ and only while
    // nobody holds the disk's lock. A full re-read (BLKRRPART) drops and re-creates every partition device, so
    // it runs only on an unused disk where the kernel lists no partitions; BLKPG then adds and resizes single
    // partitions, also on a busy disk. Partitions only the kernel knows are left alone: someone may have added
    // them on purpose.
    if (common::KernelPartitionsMatchTable(devices_, disk)) continue;
    auto fd =
        common::OpenAndLockDisk(disk.path, O_RDONLY | O_NONBLOCK, /*exclusive=*/true, std::chrono::milliseconds(0));
    if (!fd.ok()) continue;
    auto kernel = devices_.PartitionsOf(disk);
    if (kernel.ok() && kernel->empty() && !devices_.DescribeUse(disk, mounts)) {
      (void)common::RereadPartitionTable(fd->get());
    }
    if (!common::KernelPartitionsMatchTable(devices_, disk)) {
      (void)common::SyncKernelPartitions(devices_, disk, fd->get(), /*remove_vanished=*/false);
    }
  }
  return Status::Ok();
}

std::string LinuxDiskBackend::DeviceKind(const BlockDevice& disk) const {
  const std::string& n = disk.name;
  if (n.rfind("loop", 0) == 0) return "a loop device";
  if (n.rfind("nvme", 0) == 0) return "an NVMe namespace";
  if (n.rfind("dm-", 0) == 0) return "a device-mapper device";
  if (n.rfind("md", 0) == 0) return "an md RAID device";
  if (n.rfind("zram", 0) == 0 || n.rfind("ram", 0) == 0) return "a RAM disk";
  std::error_code ec;
  auto subsystem = fs::read_symlink(options_.roots.sys + "/block/" + n + "/device/subsystem", ec).filename();
  if (!ec && subsystem == "virtio") return "a virtio disk";
  if (!ec && !subsystem.empty()) return "a " + subsystem.string() + " device";
  return "a block device";
}

Status LinuxDiskBackend::FlushAndDropCaches(const BlockDevice& disk) {
  std::vector<BlockDevice> devices = {disk};
  if (auto parts = devices_.PartitionsOf(disk); parts.ok()) devices.insert(devices.end(), parts->begin(), parts->end());
  for (const auto& device : devices) {
    // Each partition has a page cache of its own: written data reaches the device, and nothing cached stays to
    // be read (or written back) while the disk is offline.
    common::UniqueFd fd(open(device.path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid() || fsync(fd.get()) != 0) return Internal(common::ErrnoMessage("flush " + device.path, errno));
    // ENOTTY: not a block device node (a test's fabricated /dev), so there is no block cache to drop.
    if (ioctl(fd.get(), BLKFLSBUF, 0) != 0 && errno != ENOTTY) {
      return Internal(common::ErrnoMessage("BLKFLSBUF " + device.path, errno));
    }
  }
  return Status::Ok();
}

Status LinuxDiskBackend::SetDiskState(uint32_t disk_number, bool online) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto entry, inventory_.DiskByNumber(disk_number));
  const BlockDevice& disk = entry.device;
  const std::string what = DiskText(disk_number, disk);
  CSI_PROXY_ASSIGN_OR_RETURN(auto offline, offline_.OfflineState(entry));
  if (!offline.has_value() == online) return Status::Ok();  // already so

  auto state_path = devices_.ScsiStatePath(disk);
  if (online) {
    if (state_path) return WriteAttribute(*state_path, "running").WithContext("bringing " + what + " online");
    return offline_.MarkOnline(entry).WithContext("bringing " + what + " online");
  }
  if (!state_path && !offline_.enabled()) {
    return FailedPrecondition(what + " is " + DeviceKind(disk) +
                              ", which has no kernel online/offline state, and there is no [host] state_dir to keep "
                              "it in");
  }
  CSI_PROXY_ASSIGN_OR_RETURN(auto mounts, common::ReadMountTable());
  if (auto use = devices_.DescribeUse(disk, mounts)) {
    return FailedPrecondition(what + " is in use: " + *use + "; refusing to take it offline");
  }
  CSI_PROXY_RETURN_IF_ERROR(FlushAndDropCaches(disk).WithContext("taking " + what + " offline"));
  if (state_path) return WriteAttribute(*state_path, "offline").WithContext("taking " + what + " offline");
  // No kernel state (NVMe, virtio, loop): the host keeps it, and every group refuses to partition, format or
  // mount the disk until it is online again.
  return offline_.MarkOffline(entry).WithContext("taking " + what + " offline");
}

StatusOr<bool> LinuxDiskBackend::GetDiskState(uint32_t disk_number) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto disk, inventory_.DiskByNumber(disk_number));
  if (disk.has_scsi_state) {
    CSI_PROXY_ASSIGN_OR_RETURN(auto state, inventory_.ReadScsiState(disk));
    return !state || common::IsOnlineScsiState(*state);
  }
  CSI_PROXY_ASSIGN_OR_RETURN(auto offline, offline_.OfflineState(disk));
  return !offline.has_value();
}

std::unique_ptr<DiskBackend> MakeDiskBackend(const DiskBackendOptions& options) {
  LinuxDiskOptions linux_options;
  linux_options.gpt_partition_type = options.gpt_partition_type;
  linux_options.state_dir = options.state_dir;
  return std::make_unique<LinuxDiskBackend>(std::move(linux_options));
}

}  // namespace csi_proxy::disk

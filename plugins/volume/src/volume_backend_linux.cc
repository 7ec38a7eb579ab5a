// The volume group on Linux; see volume_backend_linux.h.
#include "volume_backend_linux.h"

#include <fcntl.h>
#include <libfdisk/libfdisk.h>
#include <linux/capability.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <thread>

#include "block_probe_linux.h"
#include "confined_open_linux.h"
#include "errno_linux.h"
#include "mount_linux.h"
#include "partition_table_linux.h"
#include "run_program.h"
#include "text.h"
#include "unmount_linux.h"

namespace csi_proxy::volume {

using common::BlockDevice;
using common::ErrnoMessage;
using common::QuotePath;
using common::UniqueFd;

namespace {

// Growth below one alignment unit is not worth rewriting the partition table for: a retried "grow to the
// maximum" then changes nothing. (Upstream skips growth below 100 MiB, a quirk of Windows' partition resizing.)
constexpr uint64_t kMinPartitionGrowth = 1 << 20;
constexpr auto kMkfsTimeout = std::chrono::minutes(30);
constexpr auto kGrowTimeout = std::chrono::minutes(30);
// A partitioner or udev holds a disk's exclusive lock for moments; a listing waits that long, not longer.
constexpr auto kListLockTimeout = std::chrono::seconds(10);

bool IsExt(const std::string& fs_type) { return fs_type == "ext2" || fs_type == "ext3" || fs_type == "ext4"; }

bool IsFilesystem(const common::Signatures& sig) {
  return !sig.ambivalent && !sig.fs_type.empty() && sig.usage == "filesystem";
}

// Mounts of a device, whole-filesystem mounts (root "/") first.
std::vector<common::MountEntry> MountsOf(const std::vector<common::MountEntry>& mounts, const BlockDevice& device) {
  auto found = common::MountsOfDevice(mounts, device);
  std::stable_partition(found.begin(), found.end(), [](const auto& m) { return m.root == "/"; });
  return found;
}

VolumeStats FromStatvfs(const struct statvfs& st) {
  VolumeStats stats;
  stats.total_bytes = static_cast<int64_t>(st.f_blocks * st.f_frsize);
  stats.used_bytes = static_cast<int64_t>((st.f_blocks - st.f_bfree) * st.f_frsize);
  return stats;
}

struct FdiskContextDeleter {
  void operator()(fdisk_context* cxt) const { fdisk_unref_context(cxt); }
};
struct FdiskPartitionDeleter {
  void operator()(fdisk_partition* pa) const { fdisk_unref_partition(pa); }
};
struct FdiskTableDeleter {
  void operator()(fdisk_table* tb) const { fdisk_unref_table(tb); }
};
struct FdiskIterDeleter {
  void operator()(fdisk_iter* it) const { fdisk_free_iter(it); }
};

bool HasCapSysResource() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &header, data) != 0) return false;
  return (data[CAP_SYS_RESOURCE / 32].effective & (1u << (CAP_SYS_RESOURCE % 32))) != 0;
}

uint32_t Le32(const unsigned char* p) { return p[0] | (p[1] << 8) | (p[2] << 16) | (uint32_t{p[3]} << 24); }
uint32_t Be32(const unsigned char* p) { return (uint32_t{p[0]} << 24) | (p[1] << 16) | (p[2] << 8) | p[3]; }

// The size a filesystem believes it has, from two fields of its superblock (ext2/3/4: block count and size at
// 1024 bytes in; xfs: sb_blocksize and sb_dblocks at the start). nullopt when unreadable or unrecognised, which
// makes the caller run the grower anyway.
std::optional<uint64_t> FilesystemBytes(const std::string& device, const std::string& fs_type) {
  UniqueFd fd(open(device.c_str(), O_RDONLY | O_CLOEXEC));
  unsigned char sb[1024];
  if (!fd.valid()) return std::nullopt;
  if (IsExt(fs_type)) {
    if (pread(fd.get(), sb, sizeof sb, 1024) != static_cast<ssize_t>(sizeof sb)) return std::nullopt;
    if (sb[0x38] != 0x53 || sb[0x39] != 0xef) return std::nullopt;  // magic 0xEF53
    const uint32_t log_block = Le32(sb + 0x18);
    if (log_block > 6) return std::nullopt;
    uint64_t blocks = Le32(sb + 0x04);
    if (Le32(sb + 0x60) & 0x80) blocks |= uint64_t{Le32(sb + 0x150)} << 32;  // INCOMPAT_64BIT: s_blocks_count_hi
    return blocks * (uint64_t{1024} << log_block);
  }
  if (fs_type == "xfs") {
    if (pread(fd.get(), sb, 16, 0) != 16 || std::memcmp(sb, "XFSB", 4) != 0) return std::nullopt;
    const uint64_t block_size = Be32(sb + 4);
    const uint64_t blocks = (uint64_t{Be32(sb + 8)} << 32) | Be32(sb + 12);
    return blocks * block_size;
  }
  return std::nullopt;
}

// The real path of an open directory, as the mount table shows a mount on it.
StatusOr<std::string> RealPathOf(int dir_fd) {
  char buf[PATH_MAX];
  const std::string link = "/proc/self/fd/" + std::to_string(dir_fd);
  ssize_t n = readlink(link.c_str(), buf, sizeof buf);
  if (n <= 0 || static_cast<size_t>(n) >= sizeof buf) return Internal(ErrnoMessage("readlink " + link, errno));
  return std::string(buf, static_cast<size_t>(n));
}

// The mkfs argv for `fs_type` with the request's (checked) options. `overwrite`: the volume holds a filesystem that
// is to go (FormatVolume of a volume mounted where MountVolume mounted it).
StatusOr<std::vector<std::string>> MkfsArgv(const std::string& mkfs, const std::string& fs_type,
                                            const FormatOptions& format, const std::string& device, bool overwrite) {
  std::vector<std::string> argv;
  if (IsExt(fs_type)) {
    // -F: a whole-disk volume would otherwise make mke2fs ask for confirmation; nodiscard: quick, like
    // Windows' quick format. mke2fs still refuses a device that is mounted or opened exclusively. mke2fs keeps
    // only its last -E, so a request's extended options are joined to ours.
    std::string extended = "nodiscard";
    std::vector<std::string> rest;
    for (size_t i = 0; i < format.mkfs_options.size(); ++i) {
      if (format.mkfs_options[i] == "-E" && i + 1 < format.mkfs_options.size()) {
        const std::string& asked = format.mkfs_options[++i];
        const bool says_discard = ("," + asked + ",").find(",discard,") != std::string::npos ||
                                  ("," + asked + ",").find(",nodiscard,") != std::string::npos;
        extended = says_discard ? asked : extended + "," + asked;
      } else {
        rest.push_back(format.mkfs_options[i]);
      }
    }
    argv = {mkfs, "-F", "-q", "-E", extended};
    argv.insert(argv.end(), rest.begin(), rest.end());
  } else if (fs_type == "xfs") {
    // Without -f mkfs.xfs refuses to overwrite anything it recognises: only an in-place format passes it.
    argv = {mkfs, "-q", "-K"};
    if (overwrite) argv.push_back("-f");
    argv.insert(argv.end(), format.mkfs_options.begin(), format.mkfs_options.end());
  } else {
    return FailedPrecondition("formatting as " + fs_type + " is not supported");
  }
  argv.push_back(device);
  return argv;
}

}  // namespace

const std::vector<std::string_view>& SupportedFilesystems() {
  static const std::vector<std::string_view> kFilesystems = {"ext4", "ext3", "ext2", "xfs"};
  return kFilesystems;
}

LinuxVolumeBackend::LinuxVolumeBackend(common::PathPolicy policy, LinuxVolumeOptions options)
    : policy_(std::move(policy)),
      options_(std::move(options)),
      devices_(options_.roots),
      inventory_(options_.roots, options_.inventory),
      offline_(options_.state_dir, options_.roots),
      mounts_(options_.state_dir) {}

StatusOr<BlockDevice> LinuxVolumeBackend::Device(const ResolvedVolume& resolved) {
  const auto* device = std::any_cast<BlockDevice>(&resolved.device);
  if (device == nullptr) return NotFound("no device " + QuotePath(resolved.id));
  return *device;
}

StatusOr<UniqueFd> LinuxVolumeBackend::OpenTarget(const common::ConfinedPath& target) const {
  return common::OpenFollowing(policy_, target, "target_path");
}

StatusOr<ResolvedVolume> LinuxVolumeBackend::ResolveVolume(const std::string& volume_id) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto volume, inventory_.ResolveVolumeId(volume_id));
  ResolvedVolume resolved{volume.path, {}};
  resolved.device = std::move(volume);
  return resolved;
}

StatusOr<std::vector<std::string>> LinuxVolumeBackend::ListVolumesOnDisk(uint32_t disk_number,
                                                                         uint32_t partition_number) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto disk_entry, inventory_.DiskByNumber(disk_number));
  const BlockDevice& disk = disk_entry.device;
  // The shared lock of the udev convention: whoever changes the kernel's partitions holds the exclusive one
  // (PartitionDisk until the new partition and its node exist; systemd-udevd while it re-reads the table after
  // a writer closed the disk, which drops every partition for a moment). Listing under it never sees the
  // partitions half re-read, so a listing that starts after PartitionDisk returned sees the new partition.
  // A holder that keeps it longer is formatting or growing a volume, which changes no partition: list anyway.
  auto lock = common::OpenAndLockDisk(disk.path, O_RDONLY | O_NONBLOCK, /*exclusive=*/false, kListLockTimeout);
  if (!lock.ok() && lock.status().code() != Code::kUnavailable) {
    return lock.status().WithContext("listing the volumes of disk " + std::to_string(disk_number));
  }
  // Taken after the lock: whatever a partitioner did before releasing it has been announced by then.
  CSI_PROXY_ASSIGN_OR_RETURN(auto parts, inventory_.PartitionsOf(disk));
  std::vector<std::string> volumes;
  if (parts.empty()) {
    // No partitions: the whole disk is a volume if it holds a filesystem. A probe that fails is reported, as
    // IsVolumeFormatted reports it, not taken for "no filesystem".
    if (partition_number != 0) return volumes;
    auto sig = common::ProbeSignatures(disk.path);
    if (!sig.ok()) return sig.status().WithContext("listing the volumes of disk " + std::to_string(disk_number));
    if (IsFilesystem(*sig)) volumes.push_back(disk.path);
    return volumes;
  }
  // Partitions that cannot hold a volume (Microsoft Reserved, extended containers) are not listed. The table is
  // read per call (a type change emits no event); a table that cannot be read is reported, like a failed probe.
  auto entries = common::ReadPartitionEntries(disk.path);
  if (!entries.ok()) {
    return entries.status().WithContext("listing the volumes of disk " + std::to_string(disk_number));
  }
  for (const auto& part : parts) {
    if (partition_number != 0 && part.partition_number != partition_number) continue;
    bool skip = false;
    for (const auto& e : *entries) {
      if (e.number == part.partition_number && (e.is_extended || e.type == common::kMicrosoftReservedGuid)) {
        skip = true;
      }
    }
    if (!skip) volumes.push_back(part.path);
  }
  return volumes;
}

StatusOr<bool> LinuxVolumeBackend::IsVolumeFormatted(const ResolvedVolume& resolved) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto volume, Device(resolved));
  CSI_PROXY_ASSIGN_OR_RETURN(auto sig, common::ProbeSignatures(volume.path));
  return IsFilesystem(sig);
}

StatusOr<std::vector<common::MountEntry>> LinuxVolumeBackend::MountsToFormatUnder(
    const BlockDevice& volume, const std::vector<common::MountEntry>& table) const {
  const auto mounts = common::MountsOfDevice(table, volume);
  std::vector<std::string> targets;
  for (const auto& m : mounts) {
    CSI_PROXY_ASSIGN_OR_RETURN(bool ours, mounts_.MadeByMountVolume(m));
    // Only the whole filesystem, once per mount point: a bind mount or a second mount stacked on a recorded
    // path is someone else's.
    const bool again = std::find(targets.begin(), targets.end(), m.target) != targets.end();
    if (!ours || m.root != "/" || again) {
      return FailedPrecondition("volume " + volume.path + " is in use: " + volume.path + " is mounted at " + m.target +
                                ", not a mount point MountVolume made; refusing to format it");
    }
    targets.push_back(m.target);
  }
  return mounts;
}

Status LinuxVolumeBackend::FormatVolume(const ResolvedVolume& resolved, const FormatOptions& format) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto volume, Device(resolved));
  const std::string fs_type = format.fs_type.empty() ? options_.default_fs_type : format.fs_type;
  const std::string what = "volume " + volume.path;
  CSI_PROXY_RETURN_IF_ERROR(common::RefuseOfflineDisk(offline_, inventory_, volume, "formatting it"));
  if (!volume.is_partition) {
    auto parts = devices_.PartitionsOf(volume);
    if (parts.ok() && !parts->empty()) {
      return FailedPrecondition(what + " is a disk with partitions; format one of its partitions instead");
    }
  }
  CSI_PROXY_ASSIGN_OR_RETURN(auto table, common::ReadMountTable());
  CSI_PROXY_RETURN_IF_ERROR(MountsToFormatUnder(volume, table).status());
  if (auto use = devices_.DescribeUse(volume, {})) {  // without mounts (above): holders and swap
    return FailedPrecondition(what + " is in use: " + *use + "; refusing to format it");
  }
  CSI_PROXY_ASSIGN_OR_RETURN(auto mkfs, common::FindSystemProgram("mkfs." + fs_type));

  // The udev-convention lock on the whole disk while the filesystem is written; look again under it.
  CSI_PROXY_ASSIGN_OR_RETURN(auto disk, devices_.DiskOf(volume));
  auto lock = common::OpenAndLockDisk(disk.path, O_RDONLY, /*exclusive=*/true);
  if (!lock.ok()) return lock.status().WithContext("formatting " + what);
  CSI_PROXY_ASSIGN_OR_RETURN(table, common::ReadMountTable());
  CSI_PROXY_ASSIGN_OR_RETURN(auto mounted, MountsToFormatUnder(volume, table));
  if (!mounted.empty()) return FormatMountedVolume(volume, fs_type, format, mkfs, mounted);
  CSI_PROXY_ASSIGN_OR_RETURN(auto sig, common::ProbeSignatures(volume.path));
  if (IsFilesystem(sig) && sig.fs_type == fs_type) return Status::Ok();  // a retry after success
  CSI_PROXY_RETURN_IF_ERROR(RefuseOpenVolume(volume));
  if (!sig.Empty()) {
    return FailedPrecondition(what + " already holds " + common::DescribeSignatures(sig) +
                              "; refusing to overwrite it");
  }
  CSI_PROXY_ASSIGN_OR_RETURN(auto argv, MkfsArgv(mkfs, fs_type, format, volume.path, /*overwrite=*/false));
  common::ProgramOptions run;
  run.timeout = kMkfsTimeout;
  return common::RunProgramChecked(argv, run).WithContext("formatting " + what + " as " + fs_type);
}

// Windows formats a mounted volume in place (Format-Volume dismounts it, formats it, and its mount points stay),
// and sig-storage-local-static-provisioner's v1 cleanup relies on it. Here: the volume's mount points (all made by
// MountVolume) are unmounted, never lazily, the filesystem is made, and it is mounted again at each with the
// attributes it had. Called under the volume's lock and the disk's.
Status LinuxVolumeBackend::FormatMountedVolume(const BlockDevice& volume, const std::string& fs_type,
                                               const FormatOptions& format, const std::string& mkfs,
                                               const std::vector<common::MountEntry>& mounts) {
  const std::string what = "volume " + volume.path;
  struct Unmounted {
    std::string mount_point;
    unsigned int attributes;
  };
  std::vector<Unmounted> unmounted;
  // Mounts the volume (as `mounted_fs`) again wherever it was unmounted; `failure` keeps its own code.
  auto mount_again = [&](const std::string& mounted_fs, Status failure) {
    for (const auto& u : unmounted) {
      Status again = MountAgain(volume, mounted_fs, u.mount_point, u.attributes);
      if (!again.ok()) {
        failure = Status(failure.ok() ? again.code() : failure.code(),
                         (failure.ok() ? "" : failure.message() + "; ") + again.message());
      }
    }
    return failure;
  };

  for (const auto& m : mounts) {
    unsigned int attributes = 0;
    Status done = UnmountMountPoint(
        m, m.target, what + " is in use at " + QuotePath(m.target) + " (files open?); refusing to format it",
        &attributes);
    if (!done.ok()) return mount_again(m.fs_type, done);
    unmounted.push_back({m.target, attributes});
  }
  const std::string old_fs = mounts.front().fs_type;
  if (Status open = RefuseOpenVolume(volume); !open.ok()) return mount_again(old_fs, open);
  auto argv = MkfsArgv(mkfs, fs_type, format, volume.path, /*overwrite=*/true);
  if (!argv.ok()) return mount_again(old_fs, argv.status());
  common::ProgramOptions run;
  run.timeout = kMkfsTimeout;
  Status made = common::RunProgramChecked(*argv, run).WithContext("formatting " + what + " as " + fs_type);
  if (!made.ok()) {
    // mkfs may have failed before writing anything (the old filesystem is still there) or after.
    auto sig = common::ProbeSignatures(volume.path);
    if (sig.ok() && IsFilesystem(*sig)) return mount_again(sig->fs_type, made);
    return made.WithContext("the volume stays unmounted from " + QuotePath(mounts.front().target));
  }
  return mount_again(fs_type, Status::Ok());
}

Status LinuxVolumeBackend::MountAgain(const BlockDevice& volume, const std::string& fs_type,
                                      const std::string& mount_point, unsigned int attributes) {
  const std::string context = "mounting " + volume.path + " again at " + QuotePath(mount_point);
  CSI_PROXY_ASSIGN_OR_RETURN(auto target, policy_.Confine(mount_point, "target_path"));
  auto dir = OpenTarget(target);
  if (!dir.ok()) return dir.status().WithContext(context);
  auto where = FindMountOf(dir->get());
  if (!where.ok()) return where.status().WithContext(context);
  if (where->is_mount_root) {
    return FailedPrecondition(context + ": " + where->entry.source + " was mounted there meanwhile");
  }
  MountRequest request{volume.path, fs_type};
  request.attributes = attributes;
  auto mount = DetachedMount::Create(request);
  if (!mount.ok()) return mount.status().WithContext(context);
  return mount->AttachAt(dir->get(), QuotePath(mount_point));
}

Status LinuxVolumeBackend::RefuseOpenVolume(const BlockDevice& volume) const {
  const std::string what = "volume " + volume.path;
  // An exclusive opener (a mount, mkfs, a VM or database given the raw device with O_EXCL, dm/md) makes the
  // kernel refuse ours.
  UniqueFd probe(open(volume.path.c_str(), O_RDONLY | O_EXCL | O_CLOEXEC));
  if (!probe.valid()) {
    if (errno == EBUSY) {
      return FailedPrecondition(what + " is open exclusively by another process; refusing to format it");
    }
    return Internal(ErrnoMessage("open " + volume.path, errno));
  }
  probe.Reset();
  // Plain writers (a raw block volume in use) leave no mark in the kernel but their descriptors in /proc: any
  // process (this one's own descriptors excepted) with the volume open for writing. A whole disk open for
  // writing is not counted: tools that manage disks keep them open so (a loop device's creator, for one).
  const pid_t self = getpid();
  std::error_code ec;
  for (std::filesystem::directory_iterator proc("/proc", ec), end; !ec && proc != end; proc.increment(ec)) {
    const std::string pid_text = proc->path().filename().string();
    if (pid_text.empty() || !std::all_of(pid_text.begin(), pid_text.end(), ::isdigit)) continue;
    if (pid_text == std::to_string(self)) continue;
    std::error_code fd_ec;
    for (std::filesystem::directory_iterator fds(proc->path() / "fd", fd_ec), fd_end; !fd_ec && fds != fd_end;
         fds.increment(fd_ec)) {
      struct stat st {};
      if (stat(fds->path().c_str(), &st) != 0 || !S_ISBLK(st.st_mode)) continue;
      if (st.st_rdev != volume.devno) continue;
      // fdinfo has a line "flags:\t0100002" (octal open flags).
      std::ifstream info(proc->path() / "fdinfo" / fds->path().filename());
      std::string line;
      unsigned long open_flags = 0;
      while (std::getline(info, line)) {
        if (line.rfind("flags:", 0) == 0) open_flags = std::strtoul(line.c_str() + 6, nullptr, 8);
      }
      if ((open_flags & O_ACCMODE) != O_RDONLY) {
        return FailedPrecondition(what + " is open for writing by process " + pid_text + "; refusing to format it");
      }
    }
  }
  return Status::Ok();
}

Status LinuxVolumeBackend::ResizeVolume(const ResolvedVolume& resolved, int64_t size_bytes) {
  if (size_bytes < 0) return InvalidArgument("invalid negative size " + std::to_string(size_bytes));
  CSI_PROXY_ASSIGN_OR_RETURN(auto resolved_device, Device(resolved));
  // Sizes as the kernel has them now, under the volume's lock (the request resolved the ID before taking it).
  CSI_PROXY_ASSIGN_OR_RETURN(auto volume, devices_.DeviceByName(resolved_device.name));
  const std::string what = "volume " + volume.path;
  CSI_PROXY_RETURN_IF_ERROR(common::RefuseOfflineDisk(offline_, inventory_, volume, "resizing it"));
  CSI_PROXY_ASSIGN_OR_RETURN(auto sig, common::ProbeSignatures(volume.path));
  if (sig.ambivalent || (!sig.fs_type.empty() && !IsFilesystem(sig))) {
    return FailedPrecondition(what + " holds " + common::DescribeSignatures(sig) + "; refusing to resize it");
  }
  const std::string fs_type = sig.fs_type;
  if (!fs_type.empty()) {
    if (!IsSupportedFilesystem(fs_type)) {
      return FailedPrecondition("growing a " + fs_type + " filesystem is not supported (ext2/3/4 and xfs are)");
    }
    CSI_PROXY_ASSIGN_OR_RETURN(auto grower, common::FindSystemProgram(IsExt(fs_type) ? "resize2fs" : "xfs_growfs"));
  }
  CSI_PROXY_ASSIGN_OR_RETURN(auto mounts, common::ReadMountTable());
  const bool mounted = !common::MountsOfDevice(mounts, volume).empty();

  // The filesystem grows when the partition (as it will be) exceeds it by an alignment unit or more.
  const std::optional<uint64_t> fs_bytes = fs_type.empty() ? std::nullopt : FilesystemBytes(volume.path, fs_type);
  auto fs_needs_growth = [&](uint64_t partition_bytes) {
    return !fs_type.empty() && (!fs_bytes || partition_bytes >= *fs_bytes + kMinPartitionGrowth);
  };
  // Everything that could refuse the filesystem's growth is checked before the partition changes.
  auto can_grow = [&](uint64_t partition_bytes) -> Status {
    if (fs_needs_growth(partition_bytes) && IsExt(fs_type) && mounted && !HasCapSysResource()) {
      // The kernel's online ext4 resize demands CAP_SYS_RESOURCE (xfs growth needs only CAP_SYS_ADMIN).
      return FailedPrecondition(what +
                                " is mounted and growing ext4 online needs CAP_SYS_RESOURCE, which this "
                                "process lacks; grant it to the service or unmount the volume first");
    }
    return Status::Ok();
  };

  uint64_t partition_bytes = volume.size_bytes;
  if (volume.is_partition) {
    CSI_PROXY_RETURN_IF_ERROR(
        GrowPartition(volume, size_bytes, can_grow, partition_bytes).WithContext("growing the partition of " + what));
  } else if (static_cast<uint64_t>(size_bytes) > volume.size_bytes) {
    return Status(Code::kOutOfRange, what + " is a whole disk of " + std::to_string(volume.size_bytes) +
                                         " bytes; it cannot grow to " + std::to_string(size_bytes) + " bytes");
  } else if (size_bytes != 0 && static_cast<uint64_t>(size_bytes) < volume.size_bytes) {
    return FailedPrecondition(what + " is a whole disk of " + std::to_string(volume.size_bytes) +
                              " bytes; shrinking it to " + std::to_string(size_bytes) +
                              " bytes is not supported (volumes only grow)");
  }
  if (!fs_needs_growth(partition_bytes)) return Status::Ok();  // growing to the current size changes nothing
  CSI_PROXY_RETURN_IF_ERROR(can_grow(partition_bytes));
  CSI_PROXY_ASSIGN_OR_RETURN(auto grown, devices_.DeviceByName(volume.name));  // the new size
  return GrowFilesystem(grown, fs_type).WithContext("growing the " + fs_type + " filesystem of " + what);
}

Status LinuxVolumeBackend::GrowPartition(const BlockDevice& volume, int64_t size_bytes,
                                         const std::function<Status(uint64_t)>& before_write,
                                         uint64_t& partition_bytes) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto disk, devices_.DiskOf(volume));
  // Not O_EXCL: the volume may be mounted (online growth). The disk lock keeps partitioners out.
  CSI_PROXY_ASSIGN_OR_RETURN(auto fd, common::OpenAndLockDisk(disk.path, O_RDWR, /*exclusive=*/true));

  std::unique_ptr<fdisk_context, FdiskContextDeleter> cxt(fdisk_new_context());
  if (!cxt) return Internal("libfdisk: out of memory");
  fdisk_disable_dialogs(cxt.get(), 1);
  if (int rc = fdisk_assign_device_by_fd(cxt.get(), fd.get(), disk.path.c_str(), 0); rc < 0) {
    return Internal(ErrnoMessage("libfdisk cannot read " + disk.path, -rc));
  }
  if (!fdisk_has_label(cxt.get())) return FailedPrecondition(disk.path + " has no partition table");
  const bool gpt = fdisk_is_label(cxt.get(), GPT);
  if (!gpt && !(fdisk_is_label(cxt.get(), DOS) && volume.partition_number <= 4)) {
    return FailedPrecondition("only GPT partitions and dos primary partitions can be grown");
  }
  const size_t partno = volume.partition_number - 1;
  fdisk_partition* current_raw = nullptr;
  if (fdisk_get_partition(cxt.get(), partno, &current_raw) < 0 || current_raw == nullptr) {
    return FailedPrecondition("the partition table of " + disk.path + " has no partition " +
                              std::to_string(volume.partition_number) + "; call Rescan");
  }
  std::unique_ptr<fdisk_partition, FdiskPartitionDeleter> current(current_raw);
  const uint64_t sector = fdisk_get_sector_size(cxt.get());
  const uint64_t start = fdisk_partition_get_start(current.get());
  const uint64_t size = fdisk_partition_get_size(current.get());
  if (start * sector != volume.start_bytes) {
    return FailedPrecondition("the kernel's view of " + volume.path + " differs from the partition table; call Rescan");
  }

  // The partition may grow up to the next partition or the last usable sector (libfdisk moved GPT's backup
  // header to the end of a grown disk when it read the table).
  uint64_t limit = fdisk_get_last_lba(cxt.get());
  fdisk_table* table_raw = nullptr;
  if (fdisk_get_partitions(cxt.get(), &table_raw) == 0 && table_raw != nullptr) {
    std::unique_ptr<fdisk_table, FdiskTableDeleter> table(table_raw);
    std::unique_ptr<fdisk_iter, FdiskIterDeleter> iter(fdisk_new_iter(FDISK_ITER_FORWARD));
    fdisk_partition* other = nullptr;
    while (fdisk_table_next_partition(table.get(), iter.get(), &other) == 0) {
      if (!fdisk_partition_has_start(other)) continue;
      uint64_t other_start = fdisk_partition_get_start(other);
      if (other_start > start) limit = std::min(limit, other_start - 1);
    }
  }
  const uint64_t max_sectors = limit >= start ? limit - start + 1 : 0;
  const uint64_t wanted = size_bytes == 0 ? max_sectors : static_cast<uint64_t>(size_bytes) / sector;
  if (wanted > max_sectors) {
    return Status(Code::kOutOfRange, "the partition can grow to at most " + std::to_string(max_sectors * sector) +
                                         " bytes, not " + std::to_string(size_bytes) + " (grow the disk first)");
  }
  partition_bytes = size * sector;
  if (wanted < size) {
    return FailedPrecondition("the partition is " + std::to_string(size * sector) + " bytes; shrinking it to " +
                              std::to_string(size_bytes) + " bytes is not supported (volumes only grow)");
  }
  if ((wanted - size) * sector < kMinPartitionGrowth) return Status::Ok();
  CSI_PROXY_RETURN_IF_ERROR(before_write(wanted * sector));

  std::unique_ptr<fdisk_partition, FdiskPartitionDeleter> change(fdisk_new_partition());
  if (!change) return Internal("libfdisk: out of memory");
  fdisk_partition_set_size(change.get(), wanted);  // start, type and GUID stay as they are
  fdisk_partition_size_explicit(change.get(), 1);
  if (int rc = fdisk_set_partition(cxt.get(), partno, change.get()); rc < 0) {
    return Internal(ErrnoMessage("libfdisk cannot resize partition " + std::to_string(volume.partition_number), -rc));
  }
  if (int rc = fdisk_write_disklabel(cxt.get()); rc < 0) {
    return Internal(ErrnoMessage("libfdisk cannot write the partition table", -rc));
  }
  fdisk_deassign_device(cxt.get(), /*nosync=*/1);
  if (fsync(fd.get()) != 0) return Internal(ErrnoMessage("fsync " + disk.path, errno));
  Status resized = common::KernelResizePartition(fd.get(), volume.partition_number, start * sector, wanted * sector);
  inventory_.Invalidate(volume.name);  // BLKPG resize emits no uevent
  CSI_PROXY_RETURN_IF_ERROR(resized);
  partition_bytes = wanted * sector;
  return Status::Ok();
}

Status LinuxVolumeBackend::GrowFilesystem(const BlockDevice& volume, const std::string& fs_type) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto mounts, common::ReadMountTable());
  auto mounted = MountsOf(mounts, volume);
  common::ProgramOptions run;
  run.timeout = kGrowTimeout;
  if (IsExt(fs_type)) {
    CSI_PROXY_ASSIGN_OR_RETURN(auto resize2fs, common::FindSystemProgram("resize2fs"));
    if (mounted.empty()) {
      // Offline growth: resize2fs insists on a freshly checked filesystem, and growing one with errors would
      // spread them. e2fsck -p repairs only what is safe without a human; 0 and 1 mean clean (or made clean).
      CSI_PROXY_ASSIGN_OR_RETURN(auto e2fsck, common::FindSystemProgram("e2fsck"));
      CSI_PROXY_ASSIGN_OR_RETURN(auto check, common::RunProgram({e2fsck, "-f", "-p", volume.path}, run));
      if (check.exit_code != 0 && check.exit_code != 1) {
        return FailedPrecondition("e2fsck -f -p found errors it could not fix (exit status " +
                                  std::to_string(check.exit_code) +
                                  "); the filesystem was not grown: " + check.output.substr(0, 500));
      }
    }
    return common::RunProgramChecked({resize2fs, volume.path}, run);
  }
  // xfs grows only while mounted: an unmounted one is mounted privately for the duration.
  CSI_PROXY_ASSIGN_OR_RETURN(auto xfs_growfs, common::FindSystemProgram("xfs_growfs"));
  std::unique_ptr<TemporaryMount> temporary;
  std::string mount_point;
  if (!mounted.empty()) {
    mount_point = mounted.front().target;
  } else {
    CSI_PROXY_ASSIGN_OR_RETURN(temporary,
                               TemporaryMount::Create(options_.scratch_dir, MountRequest{volume.path, fs_type, false}));
    mount_point = temporary->path();
  }
  return common::RunProgramChecked({xfs_growfs, "-d", mount_point}, run);
}

StatusOr<VolumeStats> LinuxVolumeBackend::GetVolumeStats(const ResolvedVolume& resolved) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto volume, Device(resolved));
  CSI_PROXY_ASSIGN_OR_RETURN(auto sig, common::ProbeSignatures(volume.path));
  if (!IsFilesystem(sig)) {
    return FailedPrecondition("volume " + volume.path + " holds no filesystem (" + common::DescribeSignatures(sig) +
                              ")");
  }
  for (int attempt = 0; attempt < 2; ++attempt) {
    CSI_PROXY_ASSIGN_OR_RETURN(auto mounts, common::ReadMountTable());
    for (const auto& m : MountsOf(mounts, volume)) {
      struct stat st {};
      struct statvfs vfs {};
      // The mount point may be covered by another mount; only a path that still shows this device counts.
      if (stat(m.target.c_str(), &st) == 0 && st.st_dev == m.devno && statvfs(m.target.c_str(), &vfs) == 0) {
        return FromStatvfs(vfs);
      }
    }
    // Not mounted (or hidden): a read-only instance attached nowhere; it vanishes when closed.
    int err = 0;
    auto detached = DetachedMount::Create(MountRequest{volume.path, sig.fs_type, true}, &err);
    if (!detached.ok() && err == EBUSY) {
      // Mounted read-write meanwhile (or elsewhere, hidden): share that instance without changing it. Only then:
      // on any other refusal (EINVAL, EUCLEAN, EIO: a damaged filesystem) a read-write mount would replay its
      // journal, and a query must not write.
      detached = DetachedMount::Create(MountRequest{volume.path, sig.fs_type, false});
    } else if (!detached.ok()) {
      return detached.status().WithContext("reading the filesystem size of " + volume.path);
    }
    if (detached.ok()) {
      struct statvfs vfs {};
      if (fstatvfs(detached->fd(), &vfs) != 0) return Internal(ErrnoMessage("fstatvfs " + volume.path, errno));
      return FromStatvfs(vfs);
    }
    if (attempt == 1) return detached.status().WithContext("reading the filesystem size of " + volume.path);
  }
  return Internal("unreachable");
}

StatusOr<uint32_t> LinuxVolumeBackend::GetDiskNumber(const ResolvedVolume& resolved) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto volume, Device(resolved));
  auto number = common::DiskNumberOf(volume);
  if (!number) {
    return FailedPrecondition("the disk of " + volume.path + " has no disk number (diskseq " +
                              std::to_string(volume.diskseq) + ")");
  }
  return *number;
}

Status LinuxVolumeBackend::MountVolume(const ResolvedVolume& resolved, const common::ConfinedPath& target) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto volume, Device(resolved));
  CSI_PROXY_RETURN_IF_ERROR(common::RefuseOfflineDisk(offline_, inventory_, volume, "mounting it"));
  CSI_PROXY_ASSIGN_OR_RETURN(auto sig, common::ProbeSignatures(volume.path));
  if (!IsFilesystem(sig)) {
    return FailedPrecondition("volume " + volume.path + " is not formatted (it holds " +
                              common::DescribeSignatures(sig) + ")");
  }
  CSI_PROXY_ASSIGN_OR_RETURN(auto dir, OpenTarget(target));
  struct stat st {};
  if (fstat(dir.get(), &st) != 0) return Internal(ErrnoMessage("fstat " + QuotePath(target.path), errno));
  if (!S_ISDIR(st.st_mode)) return FailedPrecondition("target_path " + QuotePath(target.path) + " is not a directory");
  CSI_PROXY_ASSIGN_OR_RETURN(auto where, FindMountOf(dir.get()));
  if (where.is_mount_root) {
    if (common::IsMountOf(where.entry, volume) && where.entry.root == "/") {
      return mounts_.Record(where.entry.target, volume);  // already there (recorded again, in case it was not)
    }
    return FailedPrecondition("target_path " + QuotePath(target.path) + " already has " + where.entry.source + " (" +
                              where.entry.fs_type + ") mounted on it");
  }
  CSI_PROXY_RETURN_IF_ERROR(RefuseHostOwnedVolume(volume));
  CSI_PROXY_ASSIGN_OR_RETURN(
      auto mount, DetachedMount::Create(MountRequest{volume.path, sig.fs_type, false, options_.mount_nosuid_nodev}));
  // Recorded before it exists, so that no mount of ours is ever without its record (a crash in between leaves a
  // record without a mount, which counts for nothing); the filesystem group's forced Rmdir unmounts it then.
  CSI_PROXY_ASSIGN_OR_RETURN(auto mount_point, RealPathOf(dir.get()));
  CSI_PROXY_RETURN_IF_ERROR(mounts_.Record(mount_point, volume).WithContext("recording the mount point"));
  Status attached = mount.AttachAt(dir.get(), QuotePath(target.path));
  if (!attached.ok()) (void)mounts_.Forget(mount_point);
  return attached;
}

Status LinuxVolumeBackend::RefuseHostOwnedVolume(const BlockDevice& volume) const {
  // A filesystem the node itself uses (mounted outside the allowed roots: /, /boot, /var/lib/docker) must not
  // appear in a pod; nor may a device that swap, device-mapper or md use underneath.
  CSI_PROXY_ASSIGN_OR_RETURN(auto mounts, common::ReadMountTable());
  for (const auto& m : common::MountsOfDevice(mounts, volume)) {
    if (!policy_.SplitAtRoot(m.target)) {
      return FailedPrecondition("volume " + volume.path + " is mounted at " + QuotePath(m.target) +
                                ", outside the allowed roots " + policy_.RootsForMessage() +
                                " (a filesystem of the node itself?); refusing to mount it");
    }
  }
  if (auto use = devices_.DescribeUse(volume, {})) {  // without mounts: holders and swap only
    return FailedPrecondition("volume " + *use + "; refusing to mount it");
  }
  return Status::Ok();
}

Status LinuxVolumeBackend::UnmountVolume(const ResolvedVolume& resolved, const common::ConfinedPath& target) {
  const std::string& volume_id = resolved.id;
  auto volume = Device(resolved);
  auto dir = OpenTarget(target);
  if (!dir.ok()) return dir.status().code() == Code::kNotFound ? Status::Ok() : dir.status();
  CSI_PROXY_ASSIGN_OR_RETURN(auto where, FindMountOf(dir->get()));
  if (!where.is_mount_root) return Status::Ok();  // nothing mounted there: done already
  // A volume whose device has gone (a detached disk) is still unmounted by the name it was mounted with.
  const bool same = volume.ok() ? common::IsMountOf(where.entry, *volume) : where.entry.source == volume_id;
  if (!same) {
    return FailedPrecondition("target_path " + QuotePath(target.path) + " has " + where.entry.source + " (" +
                              where.entry.fs_type + ") mounted on it, not " + QuotePath(volume_id));
  }
  {
    UniqueFd contents(openat(dir->get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (contents.valid()) syncfs(contents.get());  // flush before it goes, like upstream's Write-VolumeCache
  }
  dir->Reset();  // a descriptor inside the mount would keep it busy
  CSI_PROXY_RETURN_IF_ERROR(UnmountMountPoint(
      where.entry, target.path, "target_path " + QuotePath(target.path) + " is busy (files open?)", nullptr));
  return mounts_.Forget(where.entry.target);
}

Status LinuxVolumeBackend::UnmountMountPoint(const common::MountEntry& mount, const std::string& shown,
                                             const std::string& when_busy, unsigned int* attributes) {
  // Unmount by the mount point's real location (a symlinked target_path resolves elsewhere within the roots),
  // looked up from a descriptor of its parent and refusing a symlink in the last step.
  CSI_PROXY_ASSIGN_OR_RETURN(auto real, policy_.Confine(mount.target, "target_path"));
  CSI_PROXY_ASSIGN_OR_RETURN(auto parent, common::OpenParent(policy_, real, "target_path"));
  struct statx stx {};
  if (parent.name.empty() ||
      statx(parent.dir.get(), parent.name.c_str(), AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, &stx) != 0 ||
      stx.stx_mnt_id != static_cast<uint64_t>(mount.id)) {
    return Status(Code::kAborted, "the mount at " + QuotePath(shown) + " changed while being unmounted");
  }
  if (attributes != nullptr) {
    UniqueFd root(openat(parent.dir.get(), parent.name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (!root.valid()) return Internal(ErrnoMessage("open " + QuotePath(shown), errno));
    CSI_PROXY_ASSIGN_OR_RETURN(*attributes, MountAttributesOf(root.get()));
  }
  const std::string path = "/proc/self/fd/" + std::to_string(parent.dir.get()) + "/" + parent.name;
  if (int err = common::UnmountNotLazily(path); err != 0) {
    if (err == EBUSY) return FailedPrecondition(when_busy);
    return Internal(ErrnoMessage("unmounting " + QuotePath(shown), err));
  }
  return Status::Ok();
}

StatusOr<std::string> LinuxVolumeBackend::GetVolumeIdFromTargetPath(const common::ConfinedPath& target) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto dir, OpenTarget(target));
  CSI_PROXY_ASSIGN_OR_RETURN(auto where, FindMountOf(dir.get()));
  if (!where.is_mount_root) return NotFound("no volume is mounted at " + QuotePath(target.path));
  auto device = devices_.DeviceOfMount(where.entry);
  if (!device.ok()) {
    return NotFound(QuotePath(target.path) + " is a mount of " + where.entry.source + " (" + where.entry.fs_type +
                    "), not of a block volume");
  }
  return device->path;
}

StatusOr<std::string> LinuxVolumeBackend::GetClosestVolumeIdFromTargetPath(const common::ConfinedPath& target) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto dir, OpenTarget(target));
  CSI_PROXY_ASSIGN_OR_RETURN(auto where, FindMountOf(dir.get()));
  CSI_PROXY_ASSIGN_OR_RETURN(auto mounts, common::ReadMountTable());
  // From the mount holding the path outwards, the first one whose source is a block device.
  common::MountEntry entry = where.entry;
  for (int depth = 0; depth < 256; ++depth) {
    if (auto device = devices_.DeviceOfMount(entry); device.ok()) return device->path;
    auto parent = std::find_if(mounts.begin(), mounts.end(), [&](const auto& m) { return m.id == entry.parent_id; });
    if (parent == mounts.end() || parent->id == entry.id) break;
    entry = *parent;
  }
  return NotFound("no block volume holds " + QuotePath(target.path));
}

Status LinuxVolumeBackend::WriteVolumeCache(const ResolvedVolume& resolved) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto volume, Device(resolved));
  CSI_PROXY_ASSIGN_OR_RETURN(auto mounts, common::ReadMountTable());
  for (const auto& m : MountsOf(mounts, volume)) {
    UniqueFd fs(open(m.target.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (fs.valid() && syncfs(fs.get()) != 0) return Internal(ErrnoMessage("syncfs " + m.target, errno));
  }
  UniqueFd device(open(volume.path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!device.valid()) return Internal(ErrnoMessage("open " + volume.path, errno));
  if (fsync(device.get()) != 0) return Internal(ErrnoMessage("fsync " + volume.path, errno));
  return Status::Ok();
}

std::unique_ptr<VolumeBackend> MakeVolumeBackend(common::PathPolicy policy, const VolumeBackendOptions& options) {
  LinuxVolumeOptions linux_options;
  linux_options.default_fs_type = options.default_fs_type;
  if (!options.scratch_dir.empty()) linux_options.scratch_dir = options.scratch_dir;
  linux_options.mount_nosuid_nodev = options.mount_nosuid_nodev;
  linux_options.state_dir = options.state_dir;
  return std::make_unique<LinuxVolumeBackend>(std::move(policy), std::move(linux_options));
}

}  // namespace csi_proxy::volume

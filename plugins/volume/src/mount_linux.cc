// Mounting with the kernel's mount API; see mount_linux.h.
#include "mount_linux.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

#include "errno_linux.h"

namespace csi_proxy::volume {
namespace {

using common::ErrnoMessage;
using common::UniqueFd;

// The kernel explains a failed fsconfig/fsmount in messages read from the fs context ("e ext4: ...").
std::string KernelMessages(int fs_fd) {
  std::string text;
  char buf[512];
  for (int i = 0; i < 16; ++i) {
    ssize_t n = read(fs_fd, buf, sizeof buf - 1);
    if (n <= 0) break;
    buf[n] = '\0';
    if (!text.empty()) text += "; ";
    text += (n > 2 && buf[1] == ' ') ? buf + 2 : buf;
  }
  return text;
}

Status MountError(const std::string& what, int err, int fs_fd) {
  std::string message = ErrnoMessage(what, err);
  if (fs_fd >= 0) {
    if (std::string kernel = KernelMessages(fs_fd); !kernel.empty()) message += " (" + kernel + ")";
  }
  if (err == EBUSY) return FailedPrecondition(message);
  if (err == ENODEV) return FailedPrecondition(message + ": the kernel does not support this filesystem");
  if (err == EINVAL || err == EUCLEAN || err == EIO) return FailedPrecondition(message);
  return Internal(message);
}

bool SkipsJournalReplay(const std::string& fs_type) {
  return fs_type == "ext3" || fs_type == "ext4" || fs_type == "xfs";
}

}  // namespace

StatusOr<MountOfFd> FindMountOf(int fd) {
  struct statx stx {};
  if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_SYNC_AS_STAT, STATX_MNT_ID, &stx) != 0) {
    return Internal(ErrnoMessage("statx", errno));
  }
  if (!(stx.stx_mask & STATX_MNT_ID) || !(stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT)) {
    return FailedPrecondition("the kernel does not report mount ids through statx (needs Linux 5.8 or later)");
  }
  CSI_PROXY_ASSIGN_OR_RETURN(auto mounts, common::ReadMountTable());
  for (const auto& m : mounts) {
    if (static_cast<uint64_t>(m.id) == stx.stx_mnt_id) {
      return MountOfFd{(stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0, m};
    }
  }
  return NotFound("mount " + std::to_string(stx.stx_mnt_id) + " disappeared while being looked at");
}

StatusOr<unsigned int> MountAttributesOf(int fd) {
  struct statvfs vfs {};
  if (fstatvfs(fd, &vfs) != 0) return Internal(ErrnoMessage("fstatvfs", errno));
  unsigned int attributes = 0;
  if (vfs.f_flag & ST_RDONLY) attributes |= MOUNT_ATTR_RDONLY;
  if (vfs.f_flag & ST_NOSUID) attributes |= MOUNT_ATTR_NOSUID;
  if (vfs.f_flag & ST_NODEV) attributes |= MOUNT_ATTR_NODEV;
  if (vfs.f_flag & ST_NOEXEC) attributes |= MOUNT_ATTR_NOEXEC;
  if (vfs.f_flag & ST_NODIRATIME) attributes |= MOUNT_ATTR_NODIRATIME;
  // One of three atime modes: noatime, relatime (the kernel's default, MOUNT_ATTR_RELATIME is 0) or strictatime.
  if (vfs.f_flag & ST_NOATIME) {
    attributes |= MOUNT_ATTR_NOATIME;
  } else if (!(vfs.f_flag & ST_RELATIME)) {
    attributes |= MOUNT_ATTR_STRICTATIME;
  }
  return attributes;
}

StatusOr<DetachedMount> DetachedMount::Create(const MountRequest& request, int* failed_errno) {
  int unused = 0;
  int& err = failed_errno != nullptr ? *failed_errno : unused;
  err = 0;
  auto fail = [&](const std::string& what, int fs_fd) {
    err = errno;
    return MountError(what, err, fs_fd);
  };
  UniqueFd fs_fd(fsopen(request.fs_type.c_str(), FSOPEN_CLOEXEC));
  if (!fs_fd.valid()) return fail("fsopen " + request.fs_type, -1);
  const std::string what = "mounting " + request.device + " (" + request.fs_type + ")";
  if (fsconfig(fs_fd.get(), FSCONFIG_SET_STRING, "source", request.device.c_str(), 0) != 0) {
    return fail(what, fs_fd.get());
  }
  if (request.read_only) {
    if (fsconfig(fs_fd.get(), FSCONFIG_SET_FLAG, "ro", nullptr, 0) != 0) return fail(what, fs_fd.get());
    if (SkipsJournalReplay(request.fs_type) &&
        fsconfig(fs_fd.get(), FSCONFIG_SET_FLAG, "norecovery", nullptr, 0) != 0) {
      return fail(what, fs_fd.get());
    }
  }
  if (fsconfig(fs_fd.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0) return fail(what, fs_fd.get());
  unsigned int attributes = request.read_only ? MOUNT_ATTR_RDONLY : 0;
  if (request.nosuid_nodev) attributes |= MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
  if (request.attributes) attributes = *request.attributes;
  int mount_fd = fsmount(fs_fd.get(), FSMOUNT_CLOEXEC, attributes);
  if (mount_fd < 0) return fail(what, fs_fd.get());
  DetachedMount result;
  result.mount_fd_.Reset(mount_fd);
  return result;
}

Status DetachedMount::AttachAt(int dir_fd, const std::string& dir_for_messages) {
  if (move_mount(mount_fd_.get(), "", dir_fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0) {
    return MountError("attaching the mount at " + dir_for_messages, errno, -1);
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<TemporaryMount>> TemporaryMount::Create(const std::string& scratch_dir,
                                                                 const MountRequest& request) {
  std::error_code ec;
  std::filesystem::create_directories(scratch_dir, ec);
  struct stat st {};
  if (lstat(scratch_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
    return Internal("scratch directory " + scratch_dir + " is not a directory owned by this process's user");
  }
  chmod(scratch_dir.c_str(), 0700);
  std::string templ = scratch_dir + "/mnt-XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) return Internal(ErrnoMessage("mkdtemp in " + scratch_dir, errno));
  std::unique_ptr<TemporaryMount> tmp(new TemporaryMount());
  tmp->path_ = templ;
  UniqueFd dir(open(templ.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir.valid()) return Internal(ErrnoMessage("open " + templ, errno));
  CSI_PROXY_ASSIGN_OR_RETURN(auto mount, DetachedMount::Create(request));
  CSI_PROXY_RETURN_IF_ERROR(mount.AttachAt(dir.get(), templ));
  tmp->mounted_ = true;
  return tmp;
}

TemporaryMount::~TemporaryMount() {
  if (mounted_) {
    // Short-lived users (a resize program) are gone by now; wait briefly for stragglers, then detach lazily.
    bool done = false;
    for (int i = 0; i < 50 && !done; ++i) {
      done = umount2(path_.c_str(), UMOUNT_NOFOLLOW) == 0 || errno != EBUSY;
      if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!done) umount2(path_.c_str(), UMOUNT_NOFOLLOW | MNT_DETACH);
  }
  if (!path_.empty()) rmdir(path_.c_str());
}

}  // namespace csi_proxy::volume

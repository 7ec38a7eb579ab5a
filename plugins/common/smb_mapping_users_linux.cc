// The Linux side of the SMB mapping users; see smb_mapping_users_linux.h.
#include "smb_mapping_users_linux.h"

#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>

#include "confined_open_linux.h"
#include "errno_linux.h"
#include "mount_table_linux.h"

namespace csi_proxy::common {
namespace {

// The file system type mounted on top at `mount_point` ("" when nothing is).
StatusOr<std::string> MountedType(const std::string& mount_point) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto table, ReadMountTable());
  std::string type;
  for (const auto& entry : table) {
    if (entry.target == mount_point) type = entry.fs_type;  // the last one is on top
  }
  return type;
}

}  // namespace

bool SmbMappingUsers::LinkIsLiveHere(const std::string& local_path, const std::string& link_text) const {
  auto confined = policy_.Confine(local_path, "local_path");
  if (!confined.ok()) return false;  // no longer under the allowed roots: not a link anyone can use through us
  auto parent = OpenParent(policy_, *confined, "local_path");
  if (!parent.ok())
    return parent.status().code() != Code::kNotFound && parent.status().code() != Code::kPermissionDenied;
  if (parent->name.empty()) return false;
  char buf[4096];
  ssize_t n = readlinkat(parent->dir.get(), parent->name.c_str(), buf, sizeof buf);
  if (n < 0) return errno != ENOENT && errno != EINVAL;  // EINVAL: something else than a symlink is there now
  return std::string(buf, static_cast<size_t>(n)) == link_text;
}

Status SmbMappingUsers::UnmapHere(const SmbMapping& mapping) const {
  CSI_PROXY_RETURN_IF_ERROR(UnmountSmbMount(mapping.mount_point));
  // The server's directory goes with its last share, as the SMB group removes it.
  CSI_PROXY_ASSIGN_OR_RETURN(auto dirs, LockDirectories());
  rmdir(mapping.mount_point.substr(0, mapping.mount_point.rfind('/')).c_str());
  return Status::Ok();
}

Status UnmountSmbMount(const std::string& mount_point) {
  // Lazy: the mapping disappears at once even if files are open or the server is gone (upstream removes with
  // Force). Several stacked mounts are all removed.
  for (int i = 0; i < 16; ++i) {
    CSI_PROXY_ASSIGN_OR_RETURN(auto mounted, MountedType(mount_point));
    if (mounted.empty()) break;
    if (mounted != "cifs" && mounted != "smb3") {
      return Internal(mount_point + " holds a " + mounted + " mount, not an SMB mapping");
    }
    if (umount2(mount_point.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) != 0 && errno != EINVAL && errno != ENOENT) {
      return Internal(ErrnoMessage("unmounting " + mount_point, errno));
    }
  }
  if (rmdir(mount_point.c_str()) != 0 && errno != ENOENT && errno != ENOTEMPTY) {
    return Internal(ErrnoMessage("removing the mount point " + mount_point, errno));
  }
  return Status::Ok();
}

}  // namespace csi_proxy::common

// Unmounting a mount point, never lazily, for the volume group (UnmountVolume, FormatVolume of a volume mounted
// where MountVolume mounted it) and the filesystem group (a forced Rmdir of such a mount point).
#pragma once

#include <string>

namespace csi_proxy::common {

// umount2(`path`, UMOUNT_NOFOLLOW), never MNT_DETACH: a mount that is in use stays. A path lookup that passes
// through the mount at that moment (another call statting mount points, a scan of /proc) pins it for microseconds
// and makes the kernel answer EBUSY, so only a mount still busy after a second counts as busy. 0 when unmounted,
// else the errno of the last attempt (EBUSY: in use, files open?).
int UnmountNotLazily(const std::string& path);

}  // namespace csi_proxy::common

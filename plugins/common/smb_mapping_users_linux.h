// The Linux side of the SMB mapping users (smb_mapping_users.h): a local_path link is a symlink to the mapping's
// CIFS mount point (plus the share's sub-path), and a mapping nobody uses any more is unmounted.
#pragma once

#include <string>

#include "csi_proxy/status.hpp"
#include "smb_mapping_users.h"

namespace csi_proxy::common {

// Unmounts the SMB mapping mounted at `mount_point` (every stacked mount, lazily: open files or a dead server
// cannot block it) and removes the mount point directory (the share's). Success when nothing is mounted there;
// INTERNAL for a mount point that holds anything but cifs.
Status UnmountSmbMount(const std::string& mount_point);

}  // namespace csi_proxy::common

// The kernel's mount table (/proc/self/mountinfo) as libmount reads it.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "csi_proxy/status.hpp"

namespace csi_proxy::common {

// One line of /proc/self/mountinfo.
struct MountEntry {
  int id = 0;
  int parent_id = 0;
  dev_t devno = 0;
  std::string root;    // the path inside the filesystem that is mounted
  std::string target;  // the mount point, unescaped
  std::string source;
  std::string fs_type;
};

// /proc/self/mountinfo through libmount.
StatusOr<std::vector<MountEntry>> ReadMountTable();

}  // namespace csi_proxy::common

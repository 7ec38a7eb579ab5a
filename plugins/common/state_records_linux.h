// The Linux side of the state records (state_records.h): a private directory (mode 0700, owned by this user,
// refused otherwise) of files written with O_EXCL temporaries, fsync, rename and an fsync of the directory, and
// locks taken with flock(2). Also the two file helpers other Linux state stores use.
#pragma once

#include <string>

#include "csi_proxy/status.hpp"
#include "state_records.h"

namespace csi_proxy::common {

// Writes `content` to `name` inside the directory `dir_fd` so that readers see either the old or the new file:
// a temporary file (O_EXCL, `mode`), write, fsync, rename over `name`, fsync of the directory.
Status WriteFileAtomically(int dir_fd, const std::string& name, const std::string& content, unsigned mode);

// mkdir -p: missing parents get 0755, the last component `last_mode`; existing directories are kept.
Status MakeDirectories(const std::string& path, unsigned last_mode);

}  // namespace csi_proxy::common

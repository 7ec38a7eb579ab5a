// The mount table through libmount; see mount_table_linux.h.
#include "mount_table_linux.h"

#include <libmount/libmount.h>

#include <cerrno>
#include <memory>

#include "errno_linux.h"

namespace csi_proxy::common {

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

}  // namespace csi_proxy::common

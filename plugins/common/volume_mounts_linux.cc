// Mount points made by MountVolume, as records under state_dir; see volume_mounts_linux.h.
#include "volume_mounts_linux.h"

#include <sys/sysmacros.h>

namespace csi_proxy::common {
namespace {

std::string DevnoText(dev_t devno) { return std::to_string(major(devno)) + ":" + std::to_string(minor(devno)); }

}  // namespace

VolumeMounts::VolumeMounts(const std::string& state_dir)
    : enabled_(!state_dir.empty()), records_(state_dir.empty() ? "" : RecordsDir(state_dir)) {}

Status VolumeMounts::Record(const std::string& mount_point, const BlockDevice& device) const {
  if (!enabled_) return Status::Ok();
  return records_.Put(mount_point, {{"device", device.path}, {"devno", DevnoText(device.devno)}});
}

Status VolumeMounts::Forget(const std::string& mount_point) const {
  if (!enabled_) return Status::Ok();
  return records_.Remove(mount_point);
}

StatusOr<bool> VolumeMounts::MadeByMountVolume(const MountEntry& mount) const {
  if (!enabled_) return false;
  CSI_PROXY_ASSIGN_OR_RETURN(auto record, records_.Get(mount.target));
  if (!record) return false;
  // The device as it was mounted: by number, or by its node for filesystems that show an anonymous device number.
  return (*record)["devno"] == DevnoText(mount.devno) || (!mount.source.empty() && (*record)["device"] == mount.source);
}

}  // namespace csi_proxy::common

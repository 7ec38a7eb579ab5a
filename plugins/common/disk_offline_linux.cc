// Offline disks, as the kernel (SCSI) or the disk group's records keep them; see disk_offline_linux.h.
#include "disk_offline_linux.h"

#include <ctime>

#include "read_file_linux.h"

namespace csi_proxy::common {

bool IsOnlineScsiState(const std::string& state) {
  return state == "running" || state == "blocked" || state == "quiesce" || state == "created";
}

std::string DiskStableKey(const BlockDeviceRoots& roots, const BlockEntry& disk) {
  const std::string dir = roots.sys + "/class/block/" + disk.device.name;
  if (auto wwid = ReadTrimmedFile(dir + "/wwid", 4096); wwid && !wwid->empty()) return "wwid:" + *wwid;
  if (!disk.ids.page83.empty()) return "page83:" + disk.ids.page83;
  if (!disk.ids.serial_number.empty()) return "serial:" + disk.ids.serial_number;
  if (auto file = ReadTrimmedFile(dir + "/loop/backing_file", 8192); file && !file->empty()) {
    auto offset = ReadTrimmedFile(dir + "/loop/offset", 64);
    return "loop:" + *file + (offset && *offset != "0" ? "@" + *offset : "");
  }
  auto boot = ReadTrimmedFile("/proc/sys/kernel/random/boot_id", 64);
  return "boot:" + boot.value_or("unknown") + ":diskseq:" + std::to_string(disk.device.diskseq);
}

OfflineDisks::OfflineDisks(const std::string& state_dir, BlockDeviceRoots roots)
    : state_dir_(state_dir), roots_(std::move(roots)), records_(state_dir.empty() ? "" : RecordsDir(state_dir)) {}

StatusOr<std::optional<std::string>> OfflineDisks::OfflineState(const BlockEntry& disk) const {
  if (disk.has_scsi_state) {
    auto state = ReadTrimmedFile(roots_.sys + "/class/block/" + disk.device.name + "/device/state", 64);
    if (state && !IsOnlineScsiState(*state))
      return std::optional<std::string>("offline (its SCSI device state is '" + *state + "')");
    return std::optional<std::string>();
  }
  if (!enabled()) return std::optional<std::string>();
  CSI_PROXY_ASSIGN_OR_RETURN(auto record, records_.Get(DiskStableKey(roots_, disk)));
  if (!record) return std::optional<std::string>();
  return std::optional<std::string>("offline (taken offline with SetDiskState)");
}

Status OfflineDisks::MarkOffline(const BlockEntry& disk) const {
  if (!enabled())
    return FailedPrecondition("no [host] state_dir to keep the offline state of " + disk.device.path + " in");
  return records_.Put(DiskStableKey(roots_, disk), {{"device", disk.device.path},
                                                    {"diskseq", std::to_string(disk.device.diskseq)},
                                                    {"since", std::to_string(std::time(nullptr))}});
}

Status OfflineDisks::MarkOnline(const BlockEntry& disk) const {
  if (!enabled()) return Status::Ok();
  return records_.Remove(DiskStableKey(roots_, disk));
}

Status RefuseOfflineDisk(const OfflineDisks& offline, BlockInventory& inventory, const BlockDevice& device,
                         const std::string& action) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto disk, inventory.DiskByNumber(device.diskseq));
  CSI_PROXY_ASSIGN_OR_RETURN(auto state, offline.OfflineState(disk));
  if (!state) return Status::Ok();
  const std::string disk_text = "disk " + std::to_string(device.diskseq) + " (" + disk.device.path + ")";
  const std::string where =
      device.is_partition ? device.path + " is on " + disk_text : device.path + " is " + disk_text;
  return FailedPrecondition(where + ", which is " + *state + "; bring the disk online with SetDiskState before " +
                            action);
}

}  // namespace csi_proxy::common

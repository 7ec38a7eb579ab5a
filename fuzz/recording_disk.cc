// The disk group's recording OS layer for fuzzing: answers like a machine with two disks and never touches one.
#include "disk_backend.h"

namespace csi_proxy::disk {
namespace {

class RecordingDiskBackend : public DiskBackend {
 public:
  StatusOr<std::map<uint32_t, DiskLocation>> ListDiskLocations() override {
    return std::map<uint32_t, DiskLocation>{{0, {"0", "0", "0", "0"}}, {1, {"1", "0", "2", "3"}}};
  }
  Status PartitionDisk(uint32_t disk_number) override { return Known(disk_number); }
  Status Rescan() override { return Status::Ok(); }
  StatusOr<std::map<uint32_t, DiskIds>> ListDiskIds() override {
    return std::map<uint32_t, DiskIds>{{0, {"page83-zero", "serial0"}}, {1, {"page83-one", "serial1"}}};
  }
  StatusOr<int64_t> GetDiskSize(uint32_t disk_number) override {
    CSI_PROXY_RETURN_IF_ERROR(Known(disk_number));
    return int64_t{1} << 30;
  }
  Status SetDiskState(uint32_t disk_number, bool) override { return Known(disk_number); }
  StatusOr<bool> GetDiskState(uint32_t disk_number) override {
    CSI_PROXY_RETURN_IF_ERROR(Known(disk_number));
    return true;
  }
  StatusOr<uint32_t> FindDiskByPage83(const std::string& page83) override {
    if (page83 == "page83-zero") return 0u;
    if (page83 == "page83-one") return 1u;
    return NotFound("no disk with page83 id '" + page83 + "'");
  }

 private:
  static Status Known(uint32_t disk_number) {
    return disk_number < 2 ? Status::Ok() : NotFound("disk " + std::to_string(disk_number) + " does not exist");
  }
};

}  // namespace

std::unique_ptr<DiskBackend> MakeDiskBackend(const DiskBackendOptions&) {
  return std::make_unique<RecordingDiskBackend>();
}

}  // namespace csi_proxy::disk

// The iSCSI group's recording OS layer for fuzzing: portals and sessions live in memory; no iscsiadm, no login.
#include <algorithm>
#include <mutex>

#include "iscsi_backend.h"

namespace csi_proxy::iscsi {
namespace {

class RecordingIscsiBackend : public IscsiBackend {
 public:
  StatusOr<std::vector<Portal>> ListPortals() override {
    std::lock_guard lock(mutex_);
    return portals_;
  }
  Status AddPortal(const Portal& portal) override {
    std::lock_guard lock(mutex_);
    if (std::find(portals_.begin(), portals_.end(), portal) == portals_.end() && portals_.size() < 256) {
      portals_.push_back(portal);
    }
    return Status::Ok();
  }
  Status RemovePortal(const Portal& portal) override {
    std::lock_guard lock(mutex_);
    std::erase(portals_, portal);
    return Status::Ok();
  }
  StatusOr<std::vector<std::string>> DiscoverTargets(const Portal&) override {
    return std::vector<std::string>{"iqn.2026-01.io.example:fuzz"};
  }
  Status Connect(const Portal&, const std::string&, const ChapLogin&) override { return Status::Ok(); }
  Status Disconnect(const Portal&, const std::string&) override { return Status::Ok(); }
  StatusOr<std::vector<uint64_t>> TargetDisks(const Portal&, const std::string&) override {
    return std::vector<uint64_t>{1};
  }
  Status SetMutualChapSecret(const std::string&) override { return Status::Ok(); }

 private:
  std::mutex mutex_;
  std::vector<Portal> portals_;
};

}  // namespace

StatusOr<std::unique_ptr<IscsiBackend>> MakeIscsiBackend(const IscsiBackendOptions&) {
  return std::unique_ptr<IscsiBackend>(std::make_unique<RecordingIscsiBackend>());
}

std::vector<std::string_view> KeysOfTheOtherSystem() { return {}; }

std::string DescribeBackend(const IscsiBackendOptions&) { return "portals and sessions in memory (fuzzing)"; }

}  // namespace csi_proxy::iscsi

// The system group's recording OS layer for fuzzing: a fixed BIOS serial and an in-memory service manager; no
// systemd, no D-Bus.
#include <map>
#include <mutex>

#include "system_backend.h"

namespace csi_proxy::system {
namespace {

class FixedBiosInfo : public BiosInfoSource {
 public:
  StatusOr<std::string> SerialNumber() override { return std::string("FUZZ-SERIAL"); }
};

class RecordingServiceManager : public ServiceManager {
 public:
  StatusOr<ServiceInfo> Query(const std::string& name) override {
    std::lock_guard lock(mutex_);
    ServiceInfo info;
    info.display_name = name;
    info.status = running_.count(name) ? ServiceStatus::kRunning : ServiceStatus::kStopped;
    return info;
  }
  Status RequestStart(const std::string& name) override {
    std::lock_guard lock(mutex_);
    if (running_.size() < 1024) running_[name] = true;
    return Status::Ok();
  }
  Status RequestStop(const std::string& name) override {
    std::lock_guard lock(mutex_);
    running_.erase(name);
    return Status::Ok();
  }
  StatusOr<std::vector<std::string>> ActiveDependents(const std::string&) override {
    return std::vector<std::string>{};
  }

 private:
  std::mutex mutex_;
  std::map<std::string, bool> running_;
};

}  // namespace

std::unique_ptr<BiosInfoSource> MakeBiosInfoSource(const SystemBackendOptions&) {
  return std::make_unique<FixedBiosInfo>();
}
std::unique_ptr<ServiceManager> MakeServiceManager(const SystemBackendOptions&) {
  return std::make_unique<RecordingServiceManager>();
}

// The harness runs in no service unit of its own.
std::string OwnServiceUnit() { return ""; }

}  // namespace csi_proxy::system

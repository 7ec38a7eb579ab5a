// The SMB group's recording OS layer for fuzzing: mappings live in memory, nothing is mounted or linked.
#include <mutex>
#include <set>

#include "smb_backend.h"

namespace csi_proxy::smb {
namespace {

class RecordingSmbBackend : public SmbBackend {
 public:
  StatusOr<MappingStatus> GetMapping(const RemotePath& remote) override {
    std::lock_guard lock(mutex_);
    MappingStatus status;
    if (mapped_.count(Key(remote))) status.state = MappingState::kHealthy;
    return status;
  }
  Status Map(const RemotePath& remote, const SmbCredentials&) override {
    std::lock_guard lock(mutex_);
    if (mapped_.size() < 1024) mapped_.insert(Key(remote));
    return Status::Ok();
  }
  Status Unmap(const RemotePath& remote) override {
    std::lock_guard lock(mutex_);
    mapped_.erase(Key(remote));
    return Status::Ok();
  }
  Status CheckLink(const common::ConfinedPath&, const RemotePath&) override { return Status::Ok(); }
  Status Link(const common::ConfinedPath&, const RemotePath&) override { return Status::Ok(); }
  StatusOr<std::shared_ptr<void>> LockUsers(const RemotePath&) override { return std::shared_ptr<void>(); }
  Status AddUser(const RemotePath&, const common::ConfinedPath*) override { return Status::Ok(); }
  Status DropPin(const RemotePath&) override { return Status::Ok(); }
  StatusOr<MappingUsers> Users(const RemotePath&) override { return MappingUsers{}; }

 private:
  static std::string Key(const RemotePath& remote) { return remote.server + "/" + remote.share; }
  std::mutex mutex_;
  std::set<std::string> mapped_;
};

}  // namespace

StatusOr<std::unique_ptr<SmbBackend>> MakeSmbBackend(const SmbBackendOptions&, common::PathPolicy) {
  return std::unique_ptr<SmbBackend>(std::make_unique<RecordingSmbBackend>());
}

Status CheckSmbSupport(bool) { return Status::Ok(); }

std::vector<std::string_view> KeysOfTheOtherSystem() { return {}; }

std::string WhereMappingsAre(const SmbBackendOptions&) { return "mappings in memory (fuzzing)"; }

}  // namespace csi_proxy::smb

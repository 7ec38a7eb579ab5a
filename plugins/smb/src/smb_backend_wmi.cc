// The SMB group's backend on Windows; see smb_backend_wmi.h.
#include "smb_backend_wmi.h"

#include "smb_global_mapping.h"
#include "smb_users.h"
#include "text.h"

namespace csi_proxy::smb {
namespace {

namespace wmi = common::wmi;

class WmiSmbBackend final : public SmbBackend {
 public:
  WmiSmbBackend(const SmbBackendOptions& options, common::PathPolicy policy, WmiSmbSystem system)
      : options_(options),
        system_(std::move(system)),
        users_(options_.state_dir, std::move(policy), options_.log, system_.users) {}

  StatusOr<MappingStatus> GetMapping(const RemotePath& remote) override {
    CSI_PROXY_ASSIGN_OR_RETURN(auto session, system_.connect(wmi::kSmbNamespace));
    CSI_PROXY_ASSIGN_OR_RETURN(auto mapping, common::FindSmbGlobalMapping(*session, UncShare(remote)));
    if (!mapping) return MappingStatus{MappingState::kNotMapped, ""};
    // Anything but OK (disconnected, a network error, reconnecting after the server went away) is remade, as a
    // CIFS mount that does not answer is on Linux.
    CSI_PROXY_ASSIGN_OR_RETURN(uint64_t status, mapping->GetUint("Status"));
    if (status == common::kSmbMappingStatusOk) return MappingStatus{MappingState::kHealthy, ""};
    return MappingStatus{MappingState::kUnreachable, "its status is " + common::SmbMappingStatusName(status)};
  }

  Status Map(const RemotePath& remote, const SmbCredentials& credentials) override {
    CSI_PROXY_ASSIGN_OR_RETURN(auto session, system_.connect(wmi::kSmbNamespace));
    const std::string user =
        credentials.domain.empty() ? credentials.username : credentials.domain + "\\" + credentials.username;
    Log(LogLevel::kInfo, "mapping " + UncShare(remote) + " globally " +
                             (user.empty() ? std::string("as this machine") : "as " + user) +
                             (options_.require_privacy ? ", SMB encryption required" : ""));
    return common::CreateSmbGlobalMapping(*session, UncShare(remote), user, credentials.password,
                                          options_.require_privacy);
  }

  Status Unmap(const RemotePath& remote) override {
    CSI_PROXY_ASSIGN_OR_RETURN(auto session, system_.connect(wmi::kSmbNamespace));
    CSI_PROXY_RETURN_IF_ERROR(common::RemoveSmbGlobalMapping(*session, UncShare(remote)));
    Log(LogLevel::kInfo, "removed the global mapping of " + UncShare(remote));
    return Status::Ok();
  }

  Status CheckLink(const common::ConfinedPath& local, const RemotePath& remote) override {
    return system_.links->Check(local, UncLinkTarget(remote));
  }

  Status Link(const common::ConfinedPath& local, const RemotePath& remote) override {
    CSI_PROXY_RETURN_IF_ERROR(system_.links->Make(local, UncLinkTarget(remote)));
    Log(LogLevel::kInfo, "linked " + common::QuotePath(local.path) + " to " + UncLinkTarget(remote));
    return Status::Ok();
  }

  StatusOr<std::shared_ptr<void>> LockUsers(const RemotePath& remote) override { return users_.Lock(remote); }
  Status AddUser(const RemotePath& remote, const common::ConfinedPath* local) override {
    return users_.Add(remote, local, UncShare(remote), UncLinkTarget(remote));
  }
  Status DropPin(const RemotePath& remote) override { return users_.DropPin(remote); }
  StatusOr<MappingUsers> Users(const RemotePath& remote) override { return users_.Users(remote); }

 private:
  void Log(LogLevel level, const std::string& message) const {
    if (options_.log) options_.log(level, message);
  }

  SmbBackendOptions options_;
  WmiSmbSystem system_;
  SmbUsers users_;
};

}  // namespace

std::string UncShare(const RemotePath& remote) { return "\\\\" + remote.server + "\\" + remote.share; }

std::string UncLinkTarget(const RemotePath& remote) {
  std::string target = UncShare(remote);
  for (const auto& part : remote.subpath) target += "\\" + part;
  return target + "\\";
}

std::unique_ptr<SmbBackend> MakeWmiSmbBackend(const SmbBackendOptions& options, common::PathPolicy policy,
                                              WmiSmbSystem system) {
  return std::make_unique<WmiSmbBackend>(options, std::move(policy), std::move(system));
}

}  // namespace csi_proxy::smb

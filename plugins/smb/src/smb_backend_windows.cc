// The SMB group on Windows: the backend of smb_backend_wmi.h with the machine's WMI (ConnectWmi) and local_path
// links as directory symlinks made on a handle of their directory (confined_open_windows.h, symlink_windows.h),
// so a link planted on the way cannot send one outside the allowed roots.
#include "confined_open_windows.h"
#include "smb_backend_wmi.h"
#include "smb_global_mapping.h"
#include "smb_local_link.h"
#include "symlink_windows.h"
#include "text.h"
#include "wmi_windows.h"

namespace csi_proxy::smb {
namespace {

using common::ConfinedPath;
using common::QuotePath;

// UNC paths compare without regard to ASCII case, as the SMB client compares them.
bool SameTarget(const std::optional<std::string>& link, const std::string& target) {
  return link && common::AsciiLower(*link) == common::AsciiLower(target);
}

class WindowsSmbLinks final : public SmbLinks {
 public:
  explicit WindowsSmbLinks(common::PathPolicy policy) : policy_(std::move(policy)) {}

  Status Check(const ConfinedPath& local, const std::string& target) override {
    CSI_PROXY_ASSIGN_OR_RETURN(auto parent, LinkParent(common::OpenParent(policy_, local, "local_path"), local));
    CSI_PROXY_ASSIGN_OR_RETURN(auto entry, common::ReadEntryAt(parent.dir.get(), parent.name, QuotePath(local.path)));
    if (!entry.exists || SameTarget(entry.symlink_target, target)) return Status::Ok();
    return AlreadyExists("local_path " + QuotePath(local.path) + " already exists");
  }

  Status Make(const ConfinedPath& local, const std::string& target) override {
    CSI_PROXY_ASSIGN_OR_RETURN(auto parent, LinkParent(common::OpenParent(policy_, local, "local_path"), local));
    Status made = common::MakeSymlinkAt(parent.dir.get(), parent.name, target, /*directory=*/true,
                                        "the local_path link " + QuotePath(local.path));
    if (made.code() != Code::kAlreadyExists) return made;
    CSI_PROXY_ASSIGN_OR_RETURN(auto entry, common::ReadEntryAt(parent.dir.get(), parent.name, QuotePath(local.path)));
    if (SameTarget(entry.symlink_target, target)) return Status::Ok();
    return AlreadyExists("local_path " + QuotePath(local.path) + " already exists");
  }

 private:
  common::PathPolicy policy_;
};

}  // namespace

StatusOr<std::unique_ptr<SmbBackend>> MakeSmbBackend(const SmbBackendOptions& options, common::PathPolicy policy) {
  WmiSmbSystem system{common::ConnectWmi, std::make_unique<WindowsSmbLinks>(policy), {}};
  return MakeWmiSmbBackend(options, std::move(policy), std::move(system));
}

Status CheckSmbSupport(bool /*check_only*/) {
  // The SMB client's WMI (Windows Server 2016 and later have MSFT_SmbGlobalMapping); asking for its mappings reads
  // nothing else.
  auto session = common::ConnectWmi(common::wmi::kSmbNamespace);
  if (!session.ok()) return session.status().WithContext("this system cannot make SMB global mappings");
  auto listed = (*session)->Execute(common::wmi::Query{common::kSmbGlobalMappingClass, {"RemotePath"}, {}});
  return listed.status().WithContext("this system cannot make SMB global mappings");
}

std::vector<std::string_view> KeysOfTheOtherSystem() {
  return {"mount_root", "mount_helper", "port", "smb_version", "mount_timeout_seconds"};
}

std::string WhereMappingsAre(const SmbBackendOptions&) { return "global mappings (MSFT_SmbGlobalMapping)"; }

}  // namespace csi_proxy::smb

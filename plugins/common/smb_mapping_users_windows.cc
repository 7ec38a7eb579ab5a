// The Windows side of the SMB mapping users (smb_mapping_users.h): a local_path link is a directory symlink to the
// share's UNC path (as upstream makes it), read back on a handle of the directory that holds it; a mapping nobody
// uses any more has its MSFT_SmbGlobalMapping removed.
#include "confined_open_windows.h"
#include "smb_global_mapping.h"
#include "smb_mapping_users.h"
#include "symlink_windows.h"
#include "text.h"
#include "wmi_windows.h"

namespace csi_proxy::common {

bool SmbMappingUsers::LinkIsLiveHere(const std::string& local_path, const std::string& link_text) const {
  auto confined = policy_.Confine(local_path, "local_path");
  if (!confined.ok()) return false;  // no longer under the allowed roots: not a link anyone can use through us
  auto parent = OpenParent(policy_, *confined, "local_path", Access::kExamine);
  if (!parent.ok()) {
    return parent.status().code() != Code::kNotFound && parent.status().code() != Code::kPermissionDenied;
  }
  if (parent->name.empty()) return false;
  auto entry = ReadEntryAt(parent->dir.get(), parent->name, QuotePath(local_path));
  if (!entry.ok()) return true;  // unsure: never unmapped on a guess
  // UNC paths compare without regard to ASCII case, as the SMB client compares them.
  return entry->symlink_target && AsciiLower(*entry->symlink_target) == AsciiLower(link_text);
}

Status SmbMappingUsers::UnmapHere(const SmbMapping& mapping) const {
  CSI_PROXY_ASSIGN_OR_RETURN(auto session, ConnectWmi(wmi::kSmbNamespace));
  return RemoveSmbGlobalMapping(*session, mapping.mount_point);
}

}  // namespace csi_proxy::common

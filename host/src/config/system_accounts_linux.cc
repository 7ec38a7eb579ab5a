// See system_accounts.h: users and groups from the system databases (getpwnam_r, getgrnam_r).
#include "config/system_accounts.h"

#include <grp.h>
#include <pwd.h>

#include <charconv>
#include <vector>

namespace csi_proxy::host {

StatusOr<uint32_t> ResolveUser(const std::string& name) {
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  int rc = getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found);
  if (rc != 0 || found == nullptr) return NotFound("'" + name + "' is not a known user");
  return found->pw_uid;
}

StatusOr<uint32_t> ResolveGroup(const std::string& name_or_gid) {
  if (!name_or_gid.empty() && name_or_gid.find_first_not_of("0123456789") == std::string::npos) {
    // (gid_t)-1 means "no change" to chown, so the largest valid gid is one less.
    uint64_t gid = 0;
    auto [end, ec] = std::from_chars(name_or_gid.data(), name_or_gid.data() + name_or_gid.size(), gid);
    if (ec != std::errc() || end != name_or_gid.data() + name_or_gid.size() || gid >= UINT32_MAX) {
      return InvalidArgument("'" + name_or_gid + "' is not a valid gid (0 to 4294967294)");
    }
    return static_cast<uint32_t>(gid);
  }
  std::vector<char> buf(16384);
  group gr{};
  group* found = nullptr;
  int rc = getgrnam_r(name_or_gid.c_str(), &gr, buf.data(), buf.size(), &found);
  if (rc != 0 || found == nullptr) return NotFound("'" + name_or_gid + "' is not a known group");
  return static_cast<uint32_t>(found->gr_gid);
}

}  // namespace csi_proxy::host

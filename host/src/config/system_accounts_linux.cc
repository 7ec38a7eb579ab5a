// See system_accounts.h: users and groups from the system databases (getpwnam_r, getgrnam_r).
#include "config/system_accounts.h"

#include <grp.h>
#include <pwd.h>

#include <charconv>
#include <vector>

namespace csi_proxy::host {

StatusOr<AccountId> ResolveUser(const std::string& name) {
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  int rc = getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found);
  if (rc != 0 || found == nullptr) return NotFound("'" + name + "' is not a known user");
  return found->pw_uid;
}

StatusOr<AccountId> PrimaryGroupOf(const AccountId& user) {
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  int rc = getpwuid_r(user, &pw, buf.data(), buf.size(), &found);
  if (rc != 0 || found == nullptr)
    return NotFound("uid " + std::to_string(user) + " has no entry in the user database");
  return static_cast<uint32_t>(found->pw_gid);
}

StatusOr<AccountId> ResolveGroup(const std::string& name_or_gid) {
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

Status CheckSecurityDescriptor(const std::string&) {
  return InvalidArgument("security descriptors describe Windows objects; Unix sockets have socket_mode");
}

StatusOr<AccountId> AccountFromNumber(int64_t number) {
  // (uid_t)-1 is "no id" to the kernel, so the largest id is one less.
  if (number < 0 || number >= int64_t{UINT32_MAX}) return InvalidArgument("not an id from 0 to 4294967294");
  return static_cast<uint32_t>(number);
}

}  // namespace csi_proxy::host

// The system's accounts as the configuration names them: the callers in the authorization lists (allowed_uids,
// read_only_gids, ...) and, on Linux, the endpoints' socket group, by name or by id, resolved when the
// configuration is read (system_accounts_<system>.cc).
#pragma once

#include <cstdint>
#include <string>

#include "csi_proxy/status.hpp"

namespace csi_proxy::host {

// An account as the system compares it when a call is authorized: a uid or gid on Linux; on Windows a SID in its
// string form ("S-1-5-32-544"), which names users and groups alike.
#if defined(_WIN32)
using AccountId = std::string;
#else
using AccountId = uint32_t;
#endif

// The user `name` (on Windows also a SID, or a well-known account such as "NT AUTHORITY\SYSTEM"); NOT_FOUND when
// the system knows none, INVALID_ARGUMENT when the name is a group's.
StatusOr<AccountId> ResolveUser(const std::string& name);

// The group `name_or_id` (a group name or a numeric gid on Linux; a group name such as "BUILTIN\Administrators"
// or a SID on Windows): INVALID_ARGUMENT for an id out of range or an account that is no group, NOT_FOUND for a
// name the system does not know.
StatusOr<AccountId> ResolveGroup(const std::string& name_or_id);

// The primary group of `user` (Linux: its entry in the user database), for a runner that switches to a user
// without naming a group; NOT_FOUND when the database has no entry for the user, and on Windows, whose accounts
// have none to switch to.
StatusOr<AccountId> PrimaryGroupOf(const AccountId& user);

// An account written as a number in the configuration: the uid or gid itself on Linux (INVALID_ARGUMENT "not an
// id from 0 to 4294967294" out of range); always INVALID_ARGUMENT on Windows, which does not number accounts.
StatusOr<AccountId> AccountFromNumber(int64_t number);

// OK when `sddl` is a security descriptor in SDDL the system accepts (Windows: [host] pipe_sddl); otherwise
// INVALID_ARGUMENT with the system's reason.
Status CheckSecurityDescriptor(const std::string& sddl);

// An account for messages and reports: "1000", "S-1-5-18".
inline std::string AccountText(uint32_t id) { return std::to_string(id); }
inline std::string AccountText(const std::string& sid) { return sid; }

}  // namespace csi_proxy::host

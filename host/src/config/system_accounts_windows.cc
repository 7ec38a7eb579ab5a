// See system_accounts.h: accounts are SIDs. Names go through LookupAccountName (local and well-known accounts,
// and domain accounts on a domain member: "BUILTIN\Administrators", "NT AUTHORITY\SYSTEM", "CONTOSO\csi-driver");
// a SID given as such ("S-1-5-32-544") is taken in its canonical form.
#include "config/system_accounts.h"

#include "config/win32_windows.h"  // winsock2.h and windows.h, before the headers that need them

#include <sddl.h>

#include <vector>

namespace csi_proxy::host {
namespace {

struct Account {
  std::string sid;
  SID_NAME_USE use = SidTypeUnknown;
};

// The kind of account `sid` is, when the system can tell (a domain SID on a machine that cannot reach the domain
// stays unknown).
SID_NAME_USE KindOf(PSID sid) {
  wchar_t name[256], domain[256];
  DWORD name_size = 256, domain_size = 256;
  SID_NAME_USE use = SidTypeUnknown;
  if (!LookupAccountSidW(nullptr, sid, name, &name_size, domain, &domain_size, &use)) return SidTypeUnknown;
  return use;
}

StatusOr<Account> Find(const std::string& name) {
  if (name.size() > 2 && (name[0] == 'S' || name[0] == 's') && name[1] == '-') {
    PSID sid = nullptr;
    if (!ConvertStringSidToSidW(Widen(name).c_str(), &sid)) {
      return InvalidArgument("'" + name + "' is not a valid SID: " + ErrorText(GetLastError()));
    }
    Account account;
    auto text = SidText(sid);
    account.use = KindOf(sid);
    LocalFree(sid);
    CSI_PROXY_ASSIGN_OR_RETURN(account.sid, std::move(text));
    return account;
  }
  std::wstring wide = Widen(name);
  DWORD sid_size = 0, domain_size = 0;
  SID_NAME_USE use = SidTypeUnknown;
  LookupAccountNameW(nullptr, wide.c_str(), nullptr, &sid_size, nullptr, &domain_size, &use);
  DWORD error = GetLastError();
  if (sid_size == 0) {
    if (error == ERROR_NONE_MAPPED) return NotFound("'" + name + "' is not a known account");
    return NotFound("'" + name + "' cannot be looked up: " + ErrorText(error));
  }
  std::vector<unsigned char> sid(sid_size);
  std::vector<wchar_t> domain(domain_size + 1);
  if (!LookupAccountNameW(nullptr, wide.c_str(), sid.data(), &sid_size, domain.data(), &domain_size, &use)) {
    return NotFound("'" + name + "' cannot be looked up: " + ErrorText(GetLastError()));
  }
  Account account;
  account.use = use;
  CSI_PROXY_ASSIGN_OR_RETURN(account.sid, SidText(sid.data()));
  return account;
}

// Well-known SIDs are users (LocalSystem, LocalService) or groups (Everyone, Authenticated Users) alike, and an
// account whose kind is unknown may be either.
bool CanBeUser(SID_NAME_USE use) { return use != SidTypeGroup && use != SidTypeAlias && use != SidTypeDomain; }
bool CanBeGroup(SID_NAME_USE use) {
  return use == SidTypeGroup || use == SidTypeAlias || use == SidTypeWellKnownGroup || use == SidTypeUnknown;
}

}  // namespace

StatusOr<AccountId> ResolveUser(const std::string& name) {
  CSI_PROXY_ASSIGN_OR_RETURN(Account account, Find(name));
  if (!CanBeUser(account.use)) {
    return InvalidArgument("'" + name + "' (" + account.sid +
                           ") is a group, never a caller's own account: list it with the gids");
  }
  return account.sid;
}

StatusOr<AccountId> ResolveGroup(const std::string& name_or_id) {
  CSI_PROXY_ASSIGN_OR_RETURN(Account account, Find(name_or_id));
  if (!CanBeGroup(account.use)) {
    return InvalidArgument("'" + name_or_id + "' (" + account.sid +
                           ") is not a group: list a caller's own account with the uids");
  }
  return account.sid;
}

StatusOr<AccountId> PrimaryGroupOf(const AccountId& user) {
  return NotFound(user + " has no primary group a process could switch to on Windows");
}

StatusOr<AccountId> AccountFromNumber(int64_t) {
  return InvalidArgument(
      "not an account: Windows names accounts by SID (\"S-1-5-32-544\") or by name (\"BUILTIN\\\\Administrators\")");
}

Status CheckSecurityDescriptor(const std::string& sddl) {
  PSECURITY_DESCRIPTOR descriptor = nullptr;
  if (!ConvertStringSecurityDescriptorToSecurityDescriptorW(Widen(sddl).c_str(), SDDL_REVISION_1, &descriptor,
                                                            nullptr)) {
    return InvalidArgument("'" + sddl + "' does not parse: " + ErrorText(GetLastError()));
  }
  BOOL present = FALSE, defaulted = FALSE;
  PACL dacl = nullptr;
  bool has_dacl = GetSecurityDescriptorDacl(descriptor, &present, &dacl, &defaulted) && present && dacl != nullptr;
  LocalFree(descriptor);
  // No DACL, or a null one, lets everyone in.
  if (!has_dacl) return InvalidArgument("'" + sddl + "' has no DACL, which would let every local user open the pipes");
  return Status::Ok();
}

}  // namespace csi_proxy::host

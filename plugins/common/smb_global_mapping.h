// The SMB client's global mappings (MSFT_SmbGlobalMapping in ROOT\Microsoft\Windows\SMB) through the WMI client,
// as upstream uses them since it left PowerShell (pkg/wmi/smb.go): one mapping per share (`\\server\share`),
// made with Create and the credentials as a method argument, removed with Remove and Force. Portable (it speaks
// only wmi::Session), so the SMB group's Windows backend and the filesystem group's release of a mapping's last
// link share it, and it is unit-tested on Linux against recorded answers.
//
// The password travels only in Create's Credential argument: never in a log line, an error message or a query.
// WMI's own errors are statuses as wmi::HresultStatus says (a wrong password PERMISSION_DENIED, a missing share
// NOT_FOUND, an unreachable server UNAVAILABLE, the server used with other credentials FAILED_PRECONDITION).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "csi_proxy/status.hpp"
#include "wmi.h"

namespace csi_proxy::common {

inline constexpr const char* kSmbGlobalMappingClass = "MSFT_SmbGlobalMapping";

// MSFT_SmbGlobalMapping.Status as MSFT_SmbMapping documents it: 0 OK, 1 Paused, 2 Disconnected, 3 NetworkError,
// 4 Connecting, 5 Reconnecting, 6 Unavailable; "status N" for others.
inline constexpr uint64_t kSmbMappingStatusOk = 0;
std::string SmbMappingStatusName(uint64_t status);

// The global mapping of `remote_path` ("\\server\share"; WQL compares it without regard to case); nullopt when
// there is none. UNIMPLEMENTED naming the namespace or class where the system has no SMB client's WMI.
StatusOr<std::optional<wmi::Object>> FindSmbGlobalMapping(wmi::Session& session, const std::string& remote_path);

// Create's Credential argument: "<user>:<password>", '\' and ':' in the user name escaped with a backslash, as
// PowerShell passes a PSCredential to New-SmbGlobalMapping (and upstream does). `user` may be "DOMAIN\user".
std::string SmbCredentialArgument(std::string_view user, std::string_view password);

// Creates the global mapping of `remote_path` with RequirePrivacy (SMB encryption) as given. An empty `user`
// passes no Credential, as upstream: the machine's own identity. INTERNAL when Create answers success and the
// mapping is not listed afterwards.
Status CreateSmbGlobalMapping(wmi::Session& session, const std::string& remote_path, const std::string& user,
                              const std::string& password, bool require_privacy);

// Removes the global mapping of `remote_path` with Force (open files do not keep it, as upstream); success when
// there is none.
Status RemoveSmbGlobalMapping(wmi::Session& session, const std::string& remote_path);

}  // namespace csi_proxy::common

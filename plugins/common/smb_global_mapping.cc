// MSFT_SmbGlobalMapping through the WMI client; see smb_global_mapping.h.
#include "smb_global_mapping.h"

#include <iterator>

namespace csi_proxy::common {

std::string SmbMappingStatusName(uint64_t status) {
  static constexpr const char* kNames[] = {"OK",         "Paused",       "Disconnected", "NetworkError",
                                           "Connecting", "Reconnecting", "Unavailable"};
  if (status < std::size(kNames)) return kNames[status];
  return "status " + std::to_string(status);
}

StatusOr<std::optional<wmi::Object>> FindSmbGlobalMapping(wmi::Session& session, const std::string& remote_path) {
  CSI_PROXY_ASSIGN_OR_RETURN(
      auto found, session.Execute(wmi::Query{kSmbGlobalMappingClass, {}, {{"RemotePath", "=", remote_path}}}));
  if (found.empty()) return std::optional<wmi::Object>();
  return std::optional<wmi::Object>(std::move(found.front()));
}

std::string SmbCredentialArgument(std::string_view user, std::string_view password) {
  std::string text;
  for (char c : user) {
    if (c == '\\' || c == ':') text += '\\';
    text += c;
  }
  return text + ":" + std::string(password);
}

Status CreateSmbGlobalMapping(wmi::Session& session, const std::string& remote_path, const std::string& user,
                              const std::string& password, bool require_privacy) {
  const std::string what = "mapping " + remote_path;
  wmi::Arguments in = {{"RemotePath", remote_path}, {"RequirePrivacy", require_privacy}};
  if (!user.empty()) in.emplace_back("Credential", SmbCredentialArgument(user, password));
  auto result = session.CallStatic(kSmbGlobalMappingClass, "Create", in);
  CSI_PROXY_RETURN_IF_ERROR(result.status().WithContext(what));
  CSI_PROXY_RETURN_IF_ERROR(wmi::MethodStatus(*result, kSmbGlobalMappingClass, "Create", what));
  // Never a success the system did not make.
  CSI_PROXY_ASSIGN_OR_RETURN(auto made, FindSmbGlobalMapping(session, remote_path));
  if (!made) {
    return Internal(what + ": MSFT_SmbGlobalMapping.Create answered success, but no global mapping of " + remote_path +
                    " is listed");
  }
  return Status::Ok();
}

Status RemoveSmbGlobalMapping(wmi::Session& session, const std::string& remote_path) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto mapping, FindSmbGlobalMapping(session, remote_path));
  if (!mapping) return Status::Ok();
  const std::string what = "removing the global mapping of " + remote_path;
  auto result = session.Call(*mapping, "Remove", {{"Force", true}});
  // Gone meanwhile (another remover, or the SMB client dropped it): what was asked for is done.
  if (!result.ok() && result.status().code() == Code::kNotFound) return Status::Ok();
  CSI_PROXY_RETURN_IF_ERROR(result.status().WithContext(what));
  return wmi::MethodStatus(*result, kSmbGlobalMappingClass, "Remove", what);
}

}  // namespace csi_proxy::common

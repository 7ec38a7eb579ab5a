// The SMB group library, in the layout every group's plugin.cc has: the group's keys, the platform's backend
// (MakeSmbBackend), the service that owns it, and every API version (api.h). Name and version come from the build.
#include "csi_proxy/plugin.hpp"

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "api.h"
#include "path_policy.h"
#include "smb_backend.h"
#include "smb_service.h"

namespace csi_proxy::smb {
namespace {

// ---- The group's keys ([groups.smb]; README "Configuration")
constexpr std::string_view kMountRootKey = "mount_root";
constexpr std::string_view kMountHelperKey = "mount_helper";
constexpr std::string_view kRequirePrivacyKey = "require_privacy";
constexpr std::string_view kPortKey = "port";
constexpr std::string_view kSmbVersionKey = "smb_version";
constexpr std::string_view kMountTimeoutKey = "mount_timeout_seconds";

// The keys of the backend that mounts shares (Linux's; Windows makes global mappings and has none of them).
Status ReadMountKeys(const sdk::PluginConfig& config, SmbBackendOptions& options) {
  CSI_PROXY_ASSIGN_OR_RETURN(options.mount_root, config.GetAbsolutePath(kMountRootKey, config.state_dir() + "/smb"));
  if (options.mount_root.find("/..") != std::string::npos || options.mount_root.find("/./") != std::string::npos) {
    return sdk::PluginConfig::KeyError(kMountRootKey, "must not contain '.' or '..' components, not " +
                                                          sdk::PluginConfig::QuoteValue(options.mount_root));
  }
  CSI_PROXY_ASSIGN_OR_RETURN(options.mount_helper, config.GetAbsolutePath(kMountHelperKey, "", /*may_be_empty=*/true));
  CSI_PROXY_ASSIGN_OR_RETURN(int64_t port, config.GetInt(kPortKey, options.port, sdk::IntRange{1, 65535}));
  options.port = static_cast<uint16_t>(port);
  // The version goes into the mount option string: digits and dots only ("3.1.1", "3.0", "default" aside).
  CSI_PROXY_ASSIGN_OR_RETURN(options.smb_version, config.GetString(kSmbVersionKey, ""));
  const std::string& version = options.smb_version;
  if (!version.empty() && version != "default" && version.find_first_not_of("0123456789.") != std::string::npos) {
    return sdk::PluginConfig::KeyError(
        kSmbVersionKey, "must look like 3.1.1 or be \"default\", not " + sdk::PluginConfig::QuoteValue(version));
  }
  CSI_PROXY_ASSIGN_OR_RETURN(int64_t timeout, config.GetInt(kMountTimeoutKey, 60, sdk::IntRange{1, 3600}));
  options.mount_timeout = std::chrono::seconds(timeout);
  return Status::Ok();
}

StatusOr<SmbBackendOptions> ReadKeys(const sdk::PluginConfig& config) {
  CSI_PROXY_RETURN_IF_ERROR(config.RequireKnownKeys(
      {kMountRootKey, kMountHelperKey, kRequirePrivacyKey, kPortKey, kSmbVersionKey, kMountTimeoutKey}));
  const std::vector<std::string_view> elsewhere = KeysOfTheOtherSystem();
  for (std::string_view key : elsewhere) {
    if (config.Has(key)) return sdk::PluginConfig::KeyError(key, "has a meaning on Linux only");
  }
  SmbBackendOptions options;
  if (elsewhere.empty()) CSI_PROXY_RETURN_IF_ERROR(ReadMountKeys(config, options));
  CSI_PROXY_ASSIGN_OR_RETURN(options.require_privacy, config.GetBool(kRequirePrivacyKey, options.require_privacy));
  options.state_dir = config.state_dir();
  options.log = sdk::HostLogSink();
  return options;
}

// ---- The group: backend, service, API versions
class SmbPlugin final : public sdk::Plugin {
 public:
  Status Init(sdk::Host& host) override {
    const sdk::PluginConfig& config = host.config();
    CSI_PROXY_ASSIGN_OR_RETURN(SmbBackendOptions options, ReadKeys(config));
    options.check_only = host.check_only();
    auto policy = common::PathPolicy::Create(config.kubelet_path(), config.working_dirs());
    if (!policy.ok()) return policy.status().WithContext("[host] kubelet_path or working_dirs");
    CSI_PROXY_ASSIGN_OR_RETURN(auto backend, MakeSmbBackend(options, *policy));
    service_ = std::make_unique<SmbService>(std::move(backend), std::move(*policy), sdk::HostLogSink());
    AddApiVersions(host, *service_);
    sdk::LogInfo("smb group ready; " + WhereMappingsAre(options) + ", SMB3 encryption " +
                 (options.require_privacy ? "required" : "not requested"));
    if (Status cifs = CheckSmbSupport(options.check_only); !cifs.ok()) {
      sdk::LogWarn(cifs.message() + "; NewSmbGlobalMapping will fail until that is fixed");
    }
    return Status::Ok();
  }

 private:
  std::unique_ptr<SmbService> service_;  // owns the backend; the registered methods call it
};

}  // namespace
}  // namespace csi_proxy::smb

CSI_PROXY_GROUP_PLUGIN(csi_proxy::smb::SmbPlugin)

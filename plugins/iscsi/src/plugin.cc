// The iSCSI group library, in the layout every group's plugin.cc has: the group's keys, the platform's backend
// (MakeIscsiBackend, which opens the state directory), the service that owns it, and every API version (api.h).
// Name and version come from the build.
#include "csi_proxy/plugin.hpp"

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "api.h"
#include "iscsi_backend.h"
#include "iscsi_service.h"
#include "iscsi_validation.h"

namespace csi_proxy::iscsi {
namespace {

// ---- The group's keys ([groups.iscsi]; README "Configuration")
constexpr std::string_view kStateDirKey = "state_dir";
constexpr std::string_view kInitiatorNameKey = "initiator_name";
constexpr std::string_view kNodeDbDirKey = "node_db_dir";
constexpr std::string_view kMutualChapUsernameKey = "mutual_chap_username";
constexpr std::string_view kDiscoveryTimeoutKey = "discovery_timeout_seconds";
constexpr std::string_view kLoginTimeoutKey = "login_timeout_seconds";
constexpr std::string_view kMaxPortalsKey = "max_portals";
// The most portals the state file holds whatever the key says (IscsiStateStore's limit).
constexpr int64_t kMaxPortalsLimit = 4000;

// The keys of the backend that keeps state of its own and runs open-iscsi (Linux's; on Windows the initiator
// keeps everything and none of them has a meaning).
Status ReadLinuxKeys(const sdk::PluginConfig& config, IscsiBackendOptions& options) {
  CSI_PROXY_ASSIGN_OR_RETURN(options.state_dir, config.GetAbsolutePath(kStateDirKey, config.state_dir() + "/iscsi"));
  CSI_PROXY_ASSIGN_OR_RETURN(options.initiator_name, config.GetString(kInitiatorNameKey, ""));
  if (Status iqn = ValidateIqn(options.initiator_name); !options.initiator_name.empty() && !iqn.ok()) {
    return sdk::PluginConfig::KeyError(kInitiatorNameKey, "is refused: " + iqn.message());
  }
  CSI_PROXY_ASSIGN_OR_RETURN(options.node_db_dir, config.GetAbsolutePath(kNodeDbDirKey, options.node_db_dir));
  CSI_PROXY_ASSIGN_OR_RETURN(options.mutual_chap_username, config.GetString(kMutualChapUsernameKey, ""));
  if (Status name = ValidateChapName(options.mutual_chap_username, kMutualChapUsernameKey);
      !options.mutual_chap_username.empty() && !name.ok()) {
    return sdk::PluginConfig::KeyError(kMutualChapUsernameKey, "is refused: " + name.message());
  }
  CSI_PROXY_ASSIGN_OR_RETURN(int64_t discovery, config.GetInt(kDiscoveryTimeoutKey, 15, sdk::IntRange{1, 3600}));
  options.discovery_timeout = std::chrono::seconds(discovery);
  CSI_PROXY_ASSIGN_OR_RETURN(int64_t login, config.GetInt(kLoginTimeoutKey, 120, sdk::IntRange{1, 3600}));
  options.login_timeout = std::chrono::seconds(login);
  CSI_PROXY_ASSIGN_OR_RETURN(
      int64_t max_portals,
      config.GetInt(kMaxPortalsKey, static_cast<int64_t>(options.max_portals), sdk::IntRange{1, kMaxPortalsLimit}));
  options.max_portals = static_cast<size_t>(max_portals);
  return Status::Ok();
}

StatusOr<IscsiBackendOptions> ReadKeys(const sdk::PluginConfig& config) {
  CSI_PROXY_RETURN_IF_ERROR(
      config.RequireKnownKeys({kStateDirKey, kInitiatorNameKey, kNodeDbDirKey, kMutualChapUsernameKey,
                               kDiscoveryTimeoutKey, kLoginTimeoutKey, kMaxPortalsKey}));
  const std::vector<std::string_view> elsewhere = KeysOfTheOtherSystem();
  for (std::string_view key : elsewhere) {
    if (config.Has(key)) return sdk::PluginConfig::KeyError(key, "has a meaning on Linux only");
  }
  IscsiBackendOptions options;
  if (elsewhere.empty()) CSI_PROXY_RETURN_IF_ERROR(ReadLinuxKeys(config, options));
  options.log = sdk::HostLogSink();
  return options;
}

// ---- The group: backend, service, API versions
class IscsiPlugin final : public sdk::Plugin {
 public:
  Status Init(sdk::Host& host) override {
    CSI_PROXY_ASSIGN_OR_RETURN(IscsiBackendOptions options, ReadKeys(host.config()));
    options.check_only = host.check_only();
    CSI_PROXY_ASSIGN_OR_RETURN(auto backend, MakeIscsiBackend(options));
    service_ = std::make_unique<IscsiService>(std::move(backend), sdk::HostLogSink());
    AddApiVersions(host, *service_);
    sdk::LogInfo("iscsi group ready; " + DescribeBackend(options));
    return Status::Ok();
  }

 private:
  std::unique_ptr<IscsiService> service_;  // owns the backend; the registered methods call it
};

}  // namespace
}  // namespace csi_proxy::iscsi

CSI_PROXY_GROUP_PLUGIN(csi_proxy::iscsi::IscsiPlugin)

// The iSCSI group library: reads the group's keys, builds the platform's backend (which opens the state
// directory) and serves csi-proxy-iscsi-v1alpha2 and csi-proxy-iscsi-v1alpha1 through the adapter of api.h.
#include <memory>
#include <string>

#include "api.h"
#include "csi_proxy/plugin.hpp"
#include "iscsi_backend.h"
#include "iscsi_service.h"

namespace csi_proxy::iscsi {
namespace {

StatusOr<std::chrono::milliseconds> Seconds(const sdk::PluginConfig& config, const char* key, int64_t fallback) {
  CSI_PROXY_ASSIGN_OR_RETURN(int64_t value, config.GetInt(key, fallback));
  if (value < 1 || value > 3600) return InvalidArgument(std::string("group key '") + key + "' must be 1..3600");
  return std::chrono::milliseconds(value * 1000);
}

class IscsiPlugin : public sdk::Plugin {
 public:
  Status Init(sdk::Host& host) override {
    const sdk::PluginConfig& config = host.config();
    CSI_PROXY_RETURN_IF_ERROR(
        config.RequireKnownKeys({"state_dir", "initiator_name", "node_db_dir", "mutual_chap_username",
                                 "discovery_timeout_seconds", "login_timeout_seconds", "max_portals"}));
    IscsiBackendOptions options;
    auto state_dir = config.GetString("state_dir", config.state_dir() + "/iscsi");
    auto initiator_name = config.GetString("initiator_name", "");
    auto node_db_dir = config.GetString("node_db_dir", options.node_db_dir);
    auto mutual_user = config.GetString("mutual_chap_username", "");
    auto discovery_timeout = Seconds(config, "discovery_timeout_seconds", 15);
    auto login_timeout = Seconds(config, "login_timeout_seconds", 120);
    auto max_portals = config.GetInt("max_portals", static_cast<int64_t>(options.max_portals));
    for (const Status* s : {&state_dir.status(), &initiator_name.status(), &node_db_dir.status(), &mutual_user.status(),
                            &discovery_timeout.status(), &login_timeout.status(), &max_portals.status()}) {
      if (!s->ok()) return s->WithContext("iscsi group");
    }
    if (*max_portals < 1 || *max_portals > 4000)
      return InvalidArgument("iscsi group: group key 'max_portals' must be 1..4000");
    options.max_portals = static_cast<size_t>(*max_portals);
    options.state_dir = *state_dir;
    options.initiator_name = *initiator_name;
    options.node_db_dir = *node_db_dir;
    options.mutual_chap_username = *mutual_user;
    options.discovery_timeout = *discovery_timeout;
    options.login_timeout = *login_timeout;
    options.log = sdk::HostLogSink();
    auto backend = MakeIscsiBackend(options);
    if (!backend.ok()) return backend.status().WithContext("iscsi group");
    service_ = std::make_unique<IscsiService>(std::move(*backend), sdk::HostLogSink());

    AddIscsiVersions(host, *service_);
    sdk::LogInfo("iscsi group ready; state in " + options.state_dir + ", initiator name from " +
                 (options.initiator_name.empty() ? options.initiator_name_file : std::string("the configuration")));
    return Status::Ok();
  }

 private:
  std::unique_ptr<IscsiService> service_;
};

}  // namespace
}  // namespace csi_proxy::iscsi

CSI_PROXY_PLUGIN(csi_proxy::iscsi::IscsiPlugin, "iscsi", "0.1.0")

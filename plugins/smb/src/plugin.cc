// The SMB group library: reads the group's keys, builds the allowed-roots policy for local_path from the node
// configuration and the platform's backend, and serves csi-proxy-smb-v1, -v1beta2, -v1beta1 and -v1alpha1 through
// the adapter of api.h.
#include <memory>
#include <string>

#include "api.h"
#include "csi_proxy/plugin.hpp"
#include "path_policy.h"
#include "smb_backend.h"
#include "smb_service.h"

namespace csi_proxy::smb {
namespace {

class SmbPlugin : public sdk::Plugin {
 public:
  Status Init(sdk::Host& host) override {
    const sdk::PluginConfig& config = host.config();
    CSI_PROXY_RETURN_IF_ERROR(config.RequireKnownKeys(
        {"mount_root", "mount_helper", "require_privacy", "port", "smb_version", "mount_timeout_seconds"}));
    auto policy = common::PathPolicy::Create(config.kubelet_path(), config.working_dirs());
    if (!policy.ok()) return policy.status().WithContext("smb group: [host] kubelet_path / working_dirs");

    SmbBackendOptions options;
    auto mount_root = config.GetString("mount_root", config.state_dir() + "/smb");
    auto helper = config.GetString("mount_helper", "");
    auto privacy = config.GetBool("require_privacy", true);
    auto port = config.GetInt("port", 445);
    auto version = config.GetString("smb_version", "");
    auto mount_timeout = config.GetInt("mount_timeout_seconds", 60);
    for (const Status* s : {&mount_root.status(), &helper.status(), &privacy.status(), &port.status(),
                            &version.status(), &mount_timeout.status()}) {
      if (!s->ok()) return s->WithContext("smb group");
    }
    if (*port < 1 || *port > 65535) return InvalidArgument("smb group: group key 'port' must be 1..65535");
    if (*mount_timeout < 1 || *mount_timeout > 3600) {
      return InvalidArgument("smb group: group key 'mount_timeout_seconds' must be 1..3600");
    }
    // The version goes into the mount option string: digits and dots only ("3.1.1", "3.0", "default" aside).
    if (!version->empty() && *version != "default" && version->find_first_not_of("0123456789.") != std::string::npos) {
      return InvalidArgument("smb group: group key 'smb_version' must look like 3.1.1 or be \"default\"");
    }
    options.mount_root = *mount_root;
    options.mount_helper = *helper;
    options.require_privacy = *privacy;
    options.port = static_cast<uint16_t>(*port);
    options.smb_version = *version;
    options.mount_timeout = std::chrono::seconds(*mount_timeout);
    options.state_dir = config.state_dir();
    options.log = sdk::HostLogSink();
    auto backend = MakeSmbBackend(options, *policy);
    if (!backend.ok()) return backend.status().WithContext("smb group");
    service_ = std::make_unique<SmbService>(std::move(*backend), std::move(*policy), sdk::HostLogSink());

    AddSmbVersions(host, *service_);
    sdk::LogInfo("smb group ready; mappings under " + options.mount_root + ", SMB3 encryption " +
                 (options.require_privacy ? "required" : "not requested"));
    if (Status cifs = CheckSmbSupport(); !cifs.ok()) {
      sdk::LogWarn(cifs.message() + "; NewSmbGlobalMapping will fail until that is fixed");
    }
    return Status::Ok();
  }

 private:
  std::unique_ptr<SmbService> service_;
};

}  // namespace
}  // namespace csi_proxy::smb

CSI_PROXY_PLUGIN(csi_proxy::smb::SmbPlugin, "smb", "0.1.0")

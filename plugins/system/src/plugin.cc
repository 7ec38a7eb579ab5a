// The system group library: reads the group's configuration, builds the platform's backends and serves
// csi-proxy-system-v1alpha1 (adapter: api_v1alpha1.cc).
#include <memory>
#include <set>
#include <string>

#include "api_v1alpha1.h"
#include "csi_proxy/plugin.hpp"
#include "service_name.h"
#include "system_backend.h"
#include "system_service.h"
#include "unit_policy.h"

namespace csi_proxy::system {
namespace {

class SystemPlugin : public sdk::Plugin {
 public:
  Status Init(sdk::Host& host) override {
    const sdk::PluginConfig& config = host.config();
    CSI_PROXY_RETURN_IF_ERROR(
        config.RequireKnownKeys({"systemd_private_socket", "systemd_bus_address", "service_timeout_seconds",
                                 "allowed_services", "bios_serial_files"}));

    SystemBackendOptions backend;
    CSI_PROXY_ASSIGN_OR_RETURN(backend.systemd_private_socket,
                               config.GetString("systemd_private_socket", backend.systemd_private_socket));
    if (!backend.systemd_private_socket.empty() && backend.systemd_private_socket.front() != '/') {
      return InvalidArgument("[groups.system] systemd_private_socket must be an absolute path or empty");
    }
    CSI_PROXY_ASSIGN_OR_RETURN(backend.systemd_bus_address, config.GetString("systemd_bus_address", ""));

    SystemServiceOptions options;
    CSI_PROXY_ASSIGN_OR_RETURN(int64_t timeout, config.GetInt("service_timeout_seconds", 30));
    if (timeout < 1 || timeout > 3600) {
      return InvalidArgument("[groups.system] service_timeout_seconds must be between 1 and 3600");
    }
    options.state_timeout = std::chrono::seconds(timeout);

    CSI_PROXY_ASSIGN_OR_RETURN(std::vector<std::string> allowed, config.GetStringArray("allowed_services"));
    for (const std::string& name : allowed) {
      auto unit = CanonicalServiceUnit(name);
      if (!unit.ok()) return unit.status().WithContext("[groups.system] allowed_services");
      // The units that can bring the node down stay closed whatever the list says: naming one is a mistake
      // worth refusing loudly rather than ignoring.
      if (RefusalForUnit(*unit) == UnitRefusal::kAlways) {
        return InvalidArgument("[groups.system] allowed_services names " + *unit +
                               ", which can bring the node down; this API never starts or stops it");
      }
      options.allowed_units.insert(*unit);
    }
    options.own_unit = OwnServiceUnit();

    CSI_PROXY_ASSIGN_OR_RETURN(backend.bios_serial_files, config.GetStringArray("bios_serial_files"));
    for (const std::string& file : backend.bios_serial_files) {
      if (file.empty() || file.front() != '/') {
        return InvalidArgument("[groups.system] bios_serial_files must hold absolute paths");
      }
    }

    service_ = std::make_unique<SystemService>(MakeBiosInfoSource(backend), MakeServiceManager(backend), options);
    AddSystemV1alpha1(host, *service_);

    sdk::LogInfo(
        "system group: systemd via " +
        (backend.systemd_private_socket.empty() ? std::string("(no private socket)") : backend.systemd_private_socket) +
        ", then " +
        (backend.systemd_bus_address.empty() ? std::string("the system bus") : backend.systemd_bus_address) +
        (options.allowed_units.empty()
             ? std::string("; any service may be started and stopped except those that keep the node up")
             : "; " + std::to_string(options.allowed_units.size()) + " service(s) may be started and stopped"));
    return Status::Ok();
  }

 private:
  std::unique_ptr<SystemService> service_;
};

}  // namespace
}  // namespace csi_proxy::system

CSI_PROXY_PLUGIN(csi_proxy::system::SystemPlugin, "system", "0.1.0")

// The system group library: reads the group's configuration, builds the Linux backends and serves
// csi-proxy-system-v1alpha1.
#include <memory>
#include <set>
#include <string>

#include "api_v1alpha1.h"
#include "bios_serial_linux.h"
#include "csi_proxy/plugin.hpp"
#include "service_name.h"
#include "system_service.h"
#include "systemd_linux.h"

namespace csi_proxy::system {
namespace {

class SystemPlugin : public sdk::Plugin {
 public:
  Status Init(sdk::Host& host) override {
    const sdk::PluginConfig& config = host.config();
    CSI_PROXY_RETURN_IF_ERROR(
        config.RequireKnownKeys({"systemd_private_socket", "systemd_bus_address", "service_timeout_seconds",
                                 "allowed_services", "bios_serial_files"}));

    SystemdConnectOptions connect;
    auto private_socket = config.GetString("systemd_private_socket", connect.private_socket);
    if (!private_socket.ok()) return private_socket.status();
    if (!private_socket->empty() && private_socket->front() != '/') {
      return InvalidArgument("[groups.system] systemd_private_socket must be an absolute path or empty");
    }
    connect.private_socket = *private_socket;
    auto bus_address = config.GetString("systemd_bus_address", "");
    if (!bus_address.ok()) return bus_address.status();
    connect.bus_address = *bus_address;

    SystemServiceOptions options;
    auto timeout = config.GetInt("service_timeout_seconds", 30);
    if (!timeout.ok()) return timeout.status();
    if (*timeout < 1 || *timeout > 3600) {
      return InvalidArgument("[groups.system] service_timeout_seconds must be between 1 and 3600");
    }
    options.state_timeout = std::chrono::seconds(*timeout);

    auto allowed = config.GetStringArray("allowed_services");
    if (!allowed.ok()) return allowed.status();
    for (const std::string& name : *allowed) {
      auto unit = CanonicalServiceUnit(name);
      if (!unit.ok()) return unit.status().WithContext("[groups.system] allowed_services");
      options.allowed_units.insert(*unit);
    }

    auto serial_files = config.GetStringArray("bios_serial_files");
    if (!serial_files.ok()) return serial_files.status();
    for (const std::string& file : *serial_files) {
      if (file.empty() || file.front() != '/') {
        return InvalidArgument("[groups.system] bios_serial_files must hold absolute paths");
      }
    }
    auto bios =
        serial_files->empty() ? std::make_unique<LinuxBiosInfo>() : std::make_unique<LinuxBiosInfo>(*serial_files);

    service_ =
        std::make_unique<SystemService>(std::move(bios), std::make_unique<SystemdServiceManager>(connect), options);
    AddSystemV1alpha1(host.AddService("v1alpha1", "v1alpha1.System"), *service_);

    sdk::LogInfo("system group: systemd via " +
                 (connect.private_socket.empty() ? std::string("(no private socket)") : connect.private_socket) +
                 ", then " + (connect.bus_address.empty() ? std::string("the system bus") : connect.bus_address) +
                 (options.allowed_units.empty() ? std::string("; any service may be started and stopped")
                                                : "; " + std::to_string(options.allowed_units.size()) +
                                                      " service(s) may be started and stopped"));
    return Status::Ok();
  }

 private:
  std::unique_ptr<SystemService> service_;
};

}  // namespace
}  // namespace csi_proxy::system

CSI_PROXY_PLUGIN(csi_proxy::system::SystemPlugin, "system", "0.1.0")

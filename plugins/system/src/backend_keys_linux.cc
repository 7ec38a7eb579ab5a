// The system group's Linux-only keys: how to reach systemd, and where the BIOS serial is read from.
#include "csi_proxy/config.hpp"
#include "system_backend.h"

namespace csi_proxy::system {
namespace {

constexpr std::string_view kPrivateSocketKey = "systemd_private_socket";
constexpr std::string_view kBusAddressKey = "systemd_bus_address";
constexpr std::string_view kBiosSerialFilesKey = "bios_serial_files";

}  // namespace

std::vector<std::string_view> BackendKeyNames() { return {kPrivateSocketKey, kBusAddressKey, kBiosSerialFilesKey}; }

Status ReadBackendKeys(const sdk::PluginConfig& config, SystemBackendOptions& backend) {
  CSI_PROXY_ASSIGN_OR_RETURN(backend.systemd_private_socket,
                             config.GetAbsolutePath(kPrivateSocketKey, backend.systemd_private_socket,
                                                    /*may_be_empty=*/true));
  CSI_PROXY_ASSIGN_OR_RETURN(backend.systemd_bus_address, config.GetString(kBusAddressKey, ""));
  CSI_PROXY_ASSIGN_OR_RETURN(backend.bios_serial_files, config.GetStringArray(kBiosSerialFilesKey));
  for (const std::string& file : backend.bios_serial_files) {
    if (file.empty() || file.front() != '/') {
      return sdk::PluginConfig::KeyError(kBiosSerialFilesKey,
                                         "must hold absolute paths, not " + sdk::PluginConfig::QuoteValue(file));
    }
  }
  return Status::Ok();
}

std::string DescribeServiceManager(const SystemBackendOptions& backend) {
  return "systemd via " +
         (backend.systemd_private_socket.empty() ? std::string("(no private socket)")
                                                 : backend.systemd_private_socket) +
         ", then " +
         (backend.systemd_bus_address.empty() ? std::string("the system bus") : backend.systemd_bus_address);
}

}  // namespace csi_proxy::system

// The system group library, in the layout every group's plugin.cc has: the group's keys, the platform's backends
// (MakeBiosInfoSource and MakeServiceManager), the service that owns them, and every API version (api.h). Name and
// version come from the build.
#include "csi_proxy/plugin.hpp"

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "api.h"
#include "service_name.h"
#include "system_backend.h"
#include "system_service.h"
#include "unit_policy.h"

namespace csi_proxy::system {
namespace {

// ---- The group's keys ([groups.system]; README "Configuration")
constexpr std::string_view kServiceTimeoutKey = "service_timeout_seconds";
constexpr std::string_view kAllowedServicesKey = "allowed_services";

struct Settings {
  SystemBackendOptions backend;
  SystemServiceOptions service;
};

StatusOr<Settings> ReadKeys(const sdk::PluginConfig& config) {
  std::vector<std::string_view> known = {kServiceTimeoutKey, kAllowedServicesKey};
  for (std::string_view key : BackendKeyNames()) known.push_back(key);
  CSI_PROXY_RETURN_IF_ERROR(config.RequireKnownKeys(known));
  Settings settings;
  SystemBackendOptions& backend = settings.backend;
  CSI_PROXY_RETURN_IF_ERROR(ReadBackendKeys(config, backend));

  SystemServiceOptions& service = settings.service;
  CSI_PROXY_ASSIGN_OR_RETURN(int64_t timeout, config.GetInt(kServiceTimeoutKey, 30, sdk::IntRange{1, 3600}));
  service.state_timeout = std::chrono::seconds(timeout);
  backend.service_timeout = service.state_timeout;
  CSI_PROXY_ASSIGN_OR_RETURN(std::vector<std::string> allowed, config.GetStringArray(kAllowedServicesKey));
  for (const std::string& name : allowed) {
    auto unit = CanonicalServiceName(name);
    if (!unit.ok()) return sdk::PluginConfig::KeyError(kAllowedServicesKey, "is refused: " + unit.status().message());
    // The units that can bring the node down stay closed whatever the list says: naming one is a mistake worth
    // refusing loudly rather than ignoring.
    if (RefusalForService(*unit, {}) == UnitRefusal::kAlways) {
      return sdk::PluginConfig::KeyError(
          kAllowedServicesKey, "names " + *unit + ", which can bring the node down; this API never starts or stops it");
    }
    service.allowed_units.insert(*unit);
  }
  service.own_unit = OwnServiceUnit();
  return settings;
}

// ---- The group: backends, service, API versions
class SystemPlugin final : public sdk::Plugin {
 public:
  Status Init(sdk::Host& host) override {
    CSI_PROXY_ASSIGN_OR_RETURN(Settings settings, ReadKeys(host.config()));
    const SystemBackendOptions& backend = settings.backend;
    service_ =
        std::make_unique<SystemService>(MakeBiosInfoSource(backend), MakeServiceManager(backend), settings.service);
    AddApiVersions(host, *service_);
    const size_t allowed = settings.service.allowed_units.size();
    sdk::LogInfo("system group ready; " + DescribeServiceManager(backend) +
                 (allowed == 0
                      ? std::string("; any service may be started and stopped except those that keep the node up")
                      : "; " + std::to_string(allowed) + " service(s) may be started and stopped"));
    return Status::Ok();
  }

 private:
  std::unique_ptr<SystemService> service_;  // owns the backends; the registered methods call it
};

}  // namespace
}  // namespace csi_proxy::system

CSI_PROXY_GROUP_PLUGIN(csi_proxy::system::SystemPlugin)

// The version-agnostic system service: validates every input, serializes work per service, makes start and
// stop idempotent and waits (bounded) for the final state. It speaks to the machine only through
// system_backend.h, and knows nothing of protobuf.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "keyed_mutex.h"
#include "service_name.h"
#include "system_backend.h"

namespace csi_proxy::system {

// How long a caller is willing to wait.
struct WaitLimits {
  std::optional<std::chrono::steady_clock::time_point> deadline;  // the call's deadline, if it has one
  std::function<bool()> cancelled;                                // true once the caller has gone away
};

struct SystemServiceOptions {
  // Upper bound for waiting on a start or stop, as upstream (30 s); a shorter call deadline wins.
  std::chrono::milliseconds state_timeout{std::chrono::seconds(30)};
  // How often the state is looked at while waiting, as upstream (200 ms).
  std::chrono::milliseconds poll_interval{std::chrono::milliseconds(200)};
  // Canonical unit names that StartService / StopService may touch; empty means any service that
  // unit_policy.h does not refuse. A unit refused kUnlessAllowed is opened only by naming it here. GetService
  // stays open: it changes nothing.
  std::set<std::string> allowed_units;
  // The proxy's own unit ("csi-proxy.service" or whatever it runs as), refused always; empty if not known.
  std::string own_unit;
  // Whose rules names follow (service_name.h, unit_policy.h): this build's service manager's.
  ServiceNaming naming = kNativeServiceNaming;
};

class SystemService {
 public:
  SystemService(std::unique_ptr<BiosInfoSource> bios, std::unique_ptr<ServiceManager> services,
                SystemServiceOptions options = {});

  StatusOr<std::string> GetBiosSerialNumber();

  // NOT_FOUND for an unknown service, INVALID_ARGUMENT for a name that is not a service unit name.
  StatusOr<ServiceInfo> GetService(std::string_view name);

  // Succeeds once the service runs; a running service is left alone. DEADLINE_EXCEEDED when it is not running
  // in time (the start request stays queued), INTERNAL when it stopped trying (e.g. it failed),
  // PERMISSION_DENIED for a service outside allowed_units.
  Status StartService(std::string_view name, const WaitLimits& limits = {});

  // Succeeds once the service is stopped; a stopped service is left alone. Without `force` it refuses with
  // FAILED_PRECONDITION while active units depend on the service; with `force` they are stopped too.
  Status StopService(std::string_view name, bool force, const WaitLimits& limits = {});

 private:
  // The canonical unit for a start or stop, or why it may not be touched.
  StatusOr<std::string> UnitToChange(std::string_view name) const;
  // The same refusals on what the OS says about the unit: its primary name (an alias may name a refused unit)
  // and the node-wide actions it declares.
  Status CheckUnitToChange(const std::string& unit, const ServiceInfo& info) const;
  // Polls until the service reaches `want` with nothing pending, fails when the OS settled elsewhere, or the
  // limits run out.
  Status WaitFor(const std::string& unit, ServiceStatus want, const WaitLimits& limits);

  std::unique_ptr<BiosInfoSource> bios_;
  std::unique_ptr<ServiceManager> services_;
  SystemServiceOptions options_;
  common::KeyedMutex unit_locks_;
};

}  // namespace csi_proxy::system

// The service manager on Linux: systemd, through its D-Bus API (sd-bus from libsystemd). No systemctl, no
// output parsing.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "system_backend.h"

struct sd_bus;

namespace csi_proxy::system {

struct SystemdConnectOptions {
  // systemd's own socket, spoken to directly as systemctl does when it runs as root. It works without a
  // D-Bus daemon. Tried first; "" skips it.
  std::string private_socket = kSystemdPrivateSocket;
  // A D-Bus message bus that systemd is on, tried when the private socket does not answer. "" means the
  // system bus (DBUS_SYSTEM_BUS_ADDRESS, else unix:path=/run/dbus/system_bus_socket).
  std::string bus_address;
  // Upper bound for one D-Bus method call.
  std::chrono::milliseconds call_timeout{std::chrono::seconds(25)};
};

class SystemdServiceManager : public ServiceManager {
 public:
  explicit SystemdServiceManager(SystemdConnectOptions options) : options_(std::move(options)) {}

  // Each call opens its own connection: sd-bus connections are not thread-safe, handlers run in parallel,
  // and a fresh connection survives systemd re-executing itself. Connecting to a local socket costs well
  // under a millisecond.
  StatusOr<ServiceInfo> Query(const std::string& name) override;
  Status RequestStart(const std::string& name) override;
  Status RequestStop(const std::string& name) override;
  // Units that are up and list `name` in Requires=, Requisite=, BindsTo= or PartOf=: systemd stops them
  // together with `name`.
  StatusOr<std::vector<std::string>> ActiveDependents(const std::string& name) override;

 private:
  struct BusCloser {
    void operator()(sd_bus* bus) const;
  };
  using Bus = std::unique_ptr<sd_bus, BusCloser>;

  // FAILED_PRECONDITION "systemd is not running: cannot connect to ..." when no address answers.
  StatusOr<Bus> Connect() const;

  SystemdConnectOptions options_;
};

}  // namespace csi_proxy::system

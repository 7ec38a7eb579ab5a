// Which services StartService and StopService may never touch, or touch only when the node's configuration
// names them: a CSI driver must not be able to reboot, power off or cut off the node through this API.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "service_name.h"

namespace csi_proxy::system {

enum class UnitRefusal {
  kNone,
  // Brings the node down or takes it out of service whatever the configuration says: the reboot, poweroff,
  // halt, kexec, soft-reboot and sleep services, emergency and rescue, and the proxy's own unit. Naming one in
  // allowed_services refuses the group.
  kAlways,
  // Keeps the node working as a Kubernetes node: kubelet, the container runtimes, D-Bus, journald, logind,
  // udevd, the network daemons, ssh. Refused unless allowed_services names the unit explicitly.
  kUnlessAllowed,
};

// The refusal for a canonical service unit name ("name.service" or "name@instance.service"). A template
// instance is judged by its template's name: "systemd-fsck@x.service" as "systemd-fsck".
UnitRefusal RefusalForUnit(std::string_view canonical_unit, std::string_view own_unit = {});

// The same for a canonical Windows service name (CanonicalWindowsServiceName: lower case).
//  - kAlways: csi-proxy and its own service, and what Windows cannot run without: RpcSs, RpcEptMapper,
//    DcomLaunch, LSM, SamSs, Power, PlugPlay, BrokerInfrastructure;
//  - kUnlessAllowed: the kubelet, kube-proxy, the container runtimes and Windows' container and network services
//    (containerd, docker, hns, vmcompute, flanneld, CalicoNode, CalicoFelix), remote access (WinRM, sshd,
//    TermService), the node's network and name services (Dnscache, Dhcp, nsi, BFE, MpsSvc, LanmanWorkstation,
//    LanmanServer, Netlogon, W32Time), EventLog, Winmgmt, CryptSvc, Schedule, Defender (WinDefend, Sense), wuauserv and
//    TrustedInstaller (which install updates and may restart the node).
UnitRefusal RefusalForWindowsService(std::string_view canonical_name, std::string_view own_service = {});

// RefusalForUnit or RefusalForWindowsService, as `naming` says.
UnitRefusal RefusalForService(std::string_view canonical_name, std::string_view own,
                              ServiceNaming naming = kNativeServiceNaming);

// The node-wide actions a unit declares (systemd's SuccessAction, FailureAction, StartLimitAction,
// JobTimeoutAction: "reboot", "poweroff", "exit", ...), as "Property=value"; "none" and empty are left out. A
// unit with any of them is refused whatever the configuration says: starting, stopping or failing it acts on
// the whole node.
std::vector<std::string> NodeActions(std::string_view success_action, std::string_view failure_action,
                                     std::string_view start_limit_action, std::string_view job_timeout_action);

}  // namespace csi_proxy::system

// Services the system group refuses to start or stop; see unit_policy.h.
#include "unit_policy.h"

#include <array>

namespace csi_proxy::system {
namespace {

// Template or plain names (the stem without "@instance" and ".service").
constexpr std::array<std::string_view, 12> kAlways = {
    "systemd-reboot",
    "systemd-poweroff",
    "systemd-halt",
    "systemd-kexec",
    "systemd-soft-reboot",
    "systemd-suspend",
    "systemd-hibernate",
    "systemd-hybrid-sleep",
    "systemd-suspend-then-hibernate",
    "emergency",
    "rescue",
    "csi-proxy",
};

constexpr std::array<std::string_view, 19> kUnlessAllowed = {
    "kubelet",
    "containerd",
    "crio",
    "cri-o",
    "docker",
    "dbus",
    "dbus-broker",
    "systemd-journald",
    "systemd-logind",
    "systemd-udevd",
    "systemd-networkd",
    "systemd-resolved",
    "NetworkManager",
    "systemd-timesyncd",
    "ssh",
    "sshd",

    "systemd-machined",
    "polkit",
    "chronyd",
};

// Windows service names, canonical (lower case).
constexpr std::array<std::string_view, 9> kWindowsAlways = {
    "csi-proxy", "rpcss", "rpceptmapper", "dcomlaunch", "lsm", "samss", "power", "plugplay", "brokerinfrastructure",
};

constexpr std::array<std::string_view, 29> kWindowsUnlessAllowed = {
    "kubelet",   "kube-proxy",  "containerd",        "docker",       "hns",
    "vmcompute", "flanneld",    "caliconode",        "calicofelix",  "winrm",
    "sshd",      "termservice", "dnscache",          "dhcp",         "nsi",
    "bfe",       "mpssvc",      "lanmanworkstation", "lanmanserver", "netlogon",
    "w32time",   "eventlog",    "winmgmt",           "cryptsvc",     "schedule",
    "windefend", "wuauserv",    "trustedinstaller",  "sense",
};

std::string_view Stem(std::string_view unit) {
  constexpr std::string_view kSuffix = ".service";
  if (unit.ends_with(kSuffix)) unit.remove_suffix(kSuffix.size());
  size_t at = unit.find('@');
  if (at != std::string_view::npos) unit = unit.substr(0, at);
  return unit;
}

}  // namespace

UnitRefusal RefusalForUnit(std::string_view canonical_unit, std::string_view own_unit) {
  if (!own_unit.empty() && canonical_unit == own_unit) return UnitRefusal::kAlways;
  std::string_view stem = Stem(canonical_unit);
  for (std::string_view name : kAlways) {
    if (stem == name) return UnitRefusal::kAlways;
  }
  for (std::string_view name : kUnlessAllowed) {
    if (stem == name) return UnitRefusal::kUnlessAllowed;
  }
  return UnitRefusal::kNone;
}

UnitRefusal RefusalForWindowsService(std::string_view canonical_name, std::string_view own_service) {
  if (!own_service.empty() && canonical_name == own_service) return UnitRefusal::kAlways;
  for (std::string_view name : kWindowsAlways) {
    if (canonical_name == name) return UnitRefusal::kAlways;
  }
  for (std::string_view name : kWindowsUnlessAllowed) {
    if (canonical_name == name) return UnitRefusal::kUnlessAllowed;
  }
  return UnitRefusal::kNone;
}

UnitRefusal RefusalForService(std::string_view canonical_name, std::string_view own, ServiceNaming naming) {
  return naming == ServiceNaming::kWindows ? RefusalForWindowsService(canonical_name, own)
                                           : RefusalForUnit(canonical_name, own);
}

std::vector<std::string> NodeActions(std::string_view success_action, std::string_view failure_action,
                                     std::string_view start_limit_action, std::string_view job_timeout_action) {
  std::vector<std::string> out;
  auto add = [&](const char* property, std::string_view value) {
    if (!value.empty() && value != "none") out.push_back(std::string(property) + "=" + std::string(value));
  };
  add("SuccessAction", success_action);
  add("FailureAction", failure_action);
  add("StartLimitAction", start_limit_action);
  add("JobTimeoutAction", job_timeout_action);
  return out;
}

}  // namespace csi_proxy::system

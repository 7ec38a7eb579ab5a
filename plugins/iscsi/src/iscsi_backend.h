// The OS side of the iSCSI group: what the service layer asks of the machine. Inputs arrive validated and
// normalized; implementations only talk to the OS (Linux: state files, SendTargets over TCP, open-iscsi,
// sysfs). A Windows implementation would map the same calls to MSFT_iSCSITargetPortal / MSFT_iSCSITarget.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "csi_proxy/status.hpp"
#include "iscsi_types.h"

namespace csi_proxy::iscsi {

class IscsiBackend {
 public:
  virtual ~IscsiBackend() = default;

  // Registered target portals, in the order they were added.
  // From memory, without waiting on anything: ListTargetPortals is declared CSI_PROXY_METHOD_NONBLOCKING.
  virtual std::vector<Portal> ListPortals() = 0;
  // Registers a portal; registering it again changes nothing.
  virtual Status AddPortal(const Portal& portal) = 0;
  // Unregisters a portal; NOT_FOUND if it is not registered.
  virtual Status RemovePortal(const Portal& portal) = 0;

  // The IQNs the portal offers, in the target's order, without duplicates.
  virtual StatusOr<std::vector<std::string>> DiscoverTargets(const Portal& portal) = 0;

  // Logs in to `iqn` through `portal` (which is registered). Success without change when already logged in.
  virtual Status Connect(const Portal& portal, const std::string& iqn, const ChapLogin& login) = 0;
  // Logs out; success when there is no session.
  virtual Status Disconnect(const Portal& portal, const std::string& iqn) = 0;
  // Disk numbers (the disk group's numbers) of the session's disks; empty when there is no session.
  virtual StatusOr<std::vector<uint64_t>> TargetDisks(const Portal& portal, const std::string& iqn) = 0;

  // The initiator-wide secret a target must prove in mutual CHAP; empty clears it.
  virtual Status SetMutualChapSecret(const std::string& secret) = 0;
};

// What the group's configuration sets for the platform's backend.
struct IscsiBackendOptions {
  std::string state_dir = "/var/lib/csi-proxy/iscsi";  // registered portals and the mutual CHAP secret
  // Our iSCSI name; empty means the one in `initiator_name_file` (open-iscsi's), else one derived from the
  // host name.
  std::string initiator_name;
  std::string initiator_name_file = "/etc/iscsi/initiatorname.iscsi";
  // open-iscsi's node database (Debian builds it with /etc/iscsi/nodes).
  std::string node_db_dir = "/etc/iscsi/nodes";
  // The CHAP name the target must present in mutual CHAP (open-iscsi's username_in); empty: not checked.
  std::string mutual_chap_username;
  size_t max_portals = 256;  // registered target portals at most (IscsiStateStore::kDefaultMaxPortals)
  std::chrono::milliseconds discovery_timeout{std::chrono::seconds(15)};
  std::chrono::milliseconds login_timeout{std::chrono::seconds(120)};
  LogSink log;
  // A configuration check (sdk::Host::check_only): the state directory is read, never created or cleaned up.
  bool check_only = false;
};

// The platform's backend (on Linux defined in iscsi_backend_linux.cc).
StatusOr<std::unique_ptr<IscsiBackend>> MakeIscsiBackend(const IscsiBackendOptions& options);

}  // namespace csi_proxy::iscsi

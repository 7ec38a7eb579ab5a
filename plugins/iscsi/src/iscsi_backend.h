// The OS side of the iSCSI group: what the service layer asks of the machine. Inputs arrive validated and
// normalized; implementations only talk to the OS (Linux: state files, SendTargets over TCP, open-iscsi,
// sysfs). A Windows implementation would map the same calls to MSFT_iSCSITargetPortal / MSFT_iSCSITarget.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "csi_proxy/status.hpp"
#include "iscsi_types.h"

namespace csi_proxy::iscsi {

class IscsiBackend {
 public:
  virtual ~IscsiBackend() = default;

  // Registered target portals, in the order they were added.
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

}  // namespace csi_proxy::iscsi

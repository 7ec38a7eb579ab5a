// The iSCSI group on Windows: the backend of iscsi_backend_wmi.h with the machine's WMI (ConnectWmi). The
// initiator keeps its own state, so none of the group's keys has a meaning here.
#include "iscsi_backend_wmi.h"
#include "wmi_windows.h"

namespace csi_proxy::iscsi {

StatusOr<std::unique_ptr<IscsiBackend>> MakeIscsiBackend(const IscsiBackendOptions& options) {
  return MakeWmiIscsiBackend(common::ConnectWmi, options.log);
}

std::vector<std::string_view> KeysOfTheOtherSystem() {
  return {"state_dir",
          "initiator_name",
          "node_db_dir",
          "mutual_chap_username",
          "discovery_timeout_seconds",
          "login_timeout_seconds",
          "max_portals"};
}

std::string DescribeBackend(const IscsiBackendOptions&) {
  return "portals, sessions and the mutual CHAP secret kept by the Microsoft iSCSI Initiator (MSFT_iSCSI* classes)";
}

}  // namespace csi_proxy::iscsi

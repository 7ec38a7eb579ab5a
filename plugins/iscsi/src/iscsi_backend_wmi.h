// The iSCSI group's backend on Windows: the Microsoft iSCSI Initiator through its WMI classes in
// ROOT\Microsoft\Windows\Storage (MSFT_iSCSITargetPortal, MSFT_iSCSITarget, MSFT_iSCSISession,
// MSFT_iSCSIConnection and their associations to MSFT_Disk), as upstream uses them since it left PowerShell
// (pkg/os/iscsi, pkg/wmi/iscsi.go). The initiator keeps the portals, the sessions and the mutual CHAP secret
// itself, so there is no state of ours. Portable (it speaks only wmi::Session), so it is unit-tested on Linux
// against recorded answers; iscsi_backend_windows.cc gives it ConnectWmi. Secrets travel only as method
// arguments: never in a query, a log line or an error message.
#pragma once

#include <memory>

#include "iscsi_backend.h"
#include "wmi.h"

namespace csi_proxy::iscsi {

std::unique_ptr<IscsiBackend> MakeWmiIscsiBackend(common::wmi::Connector connect, LogSink log);

}  // namespace csi_proxy::iscsi

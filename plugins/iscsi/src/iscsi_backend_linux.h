// The Linux iSCSI backend: portals and the mutual CHAP secret in the proxy's state directory, discovery with the
// in-process SendTargets client, login and logout through open-iscsi (iscsiadm + iscsid + the kernel's
// iscsi_tcp), and a session's disks from /sys/class/iscsi_session mapped to diskseq disk numbers.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "csi_proxy/status.hpp"
#include "iscsi_backend.h"
#include "iscsi_types.h"

namespace csi_proxy::iscsi {

// The configured options and what only the Linux backend has.
struct LinuxIscsiOptions : IscsiBackendOptions {
  // Where sysfs and device nodes live (tests point them at a fabricated tree).
  std::string sys_root = "/sys";
  std::string dev_root = "/dev";
};

StatusOr<std::unique_ptr<IscsiBackend>> MakeLinuxIscsiBackend(const LinuxIscsiOptions& options);

// OK when the kernel can act as an iSCSI initiator (the tcp transport is registered, or the iscsi_tcp module
// can be loaded and was); FAILED_PRECONDITION naming what is missing otherwise.
Status EnsureKernelInitiator(const std::string& sys_root);

// OK when iscsid answers on its control socket; FAILED_PRECONDITION otherwise.
Status CheckIscsidRunning();

// Sets (value) or removes (nullopt) `name = value` lines in the text of an open-iscsi node record, keeping every
// other line; new lines go before "# END RECORD" when the record has one. Values must be single-line.
std::string RewriteNodeRecord(const std::string& record,
                              const std::vector<std::pair<std::string, std::optional<std::string>>>& settings);

// The initiator name from open-iscsi's file ("InitiatorName=..."), or one derived from the host name.
std::string DefaultInitiatorName(const std::string& initiator_name_file);

}  // namespace csi_proxy::iscsi

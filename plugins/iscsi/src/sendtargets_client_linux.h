// iSCSI SendTargets discovery (RFC 7143, sections 11.12-11.13 and appendix C) done in-process over TCP.
//
// Why not iscsiadm: open-iscsi's `iscsiadm -m discovery` refuses to run unless the kernel's iscsi_tcp transport
// is loaded (it checks /sys/class/iscsi_transport first), and iscsid cannot start without the kernel's
// NETLINK_ISCSI socket. Discovery itself is plain TCP: a discovery-session login without authentication, one
// Text request "SendTargets=All", a logout. Doing it here works on any kernel, needs no daemon, writes nothing
// into open-iscsi's node database, and costs no process start.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "csi_proxy/status.hpp"
#include "iscsi_types.h"

namespace csi_proxy::iscsi {

struct DiscoveredTarget {
  std::string iqn;                     // TargetName
  std::vector<std::string> addresses;  // TargetAddress values, "<address>:<port>,<portal group tag>"
};

struct SendTargetsOptions {
  std::string initiator_name;                                   // our InitiatorName; the target may filter on it
  std::chrono::milliseconds timeout{std::chrono::seconds(15)};  // for the whole exchange
  // True once the call the discovery is for is cancelled or past its deadline, asked every 100 ms while waiting
  // for the portal; by default the call the current thread handles (sdk::CallScope), so that a discovery holds
  // its worker no longer than its caller waits.
  std::function<bool()> cancelled;
};

struct SendTargetsResult {
  std::vector<DiscoveredTarget> targets;
  // Target names the portal sent that are not valid iSCSI names (iqn./eui./naa. syntax, at most 223 bytes, RFC
  // 3720): left out of `targets` with their addresses, and described here (quoted, bounded) for a log line.
  // Passing them on would hand clients invalid UTF-8 (an unparsable reply), control bytes or megabytes.
  std::vector<std::string> dropped;
  std::string peer_address;  // the numeric address the session connected to (a host name resolved)
};

// Runs one discovery session against `portal`. Errors: UNAVAILABLE when the portal cannot be resolved or
// reached, DEADLINE_EXCEEDED when it does not answer in time, PERMISSION_DENIED when the target refuses the
// login (e.g. it demands CHAP for discovery, which the csi-proxy API cannot supply), INTERNAL for protocol
// violations.
StatusOr<SendTargetsResult> DiscoverSendTargets(const Portal& portal, const SendTargetsOptions& options);

// The targets of a SendTargets answer (the Text response's key=value data), valid names only; see `dropped`.
SendTargetsResult ParseSendTargets(const std::string& text);

}  // namespace csi_proxy::iscsi

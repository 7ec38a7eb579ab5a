// iscsiadm login exit codes to gRPC codes; see iscsiadm_status.h.
#include "iscsiadm_status.h"

namespace csi_proxy::iscsi {

Status IscsiadmLoginStatus(int exit_code, const std::string& what, const std::string& output) {
  auto message = [&](const std::string& meaning) {
    std::string m =
        "iscsiadm could not log in to " + what + " (exit " + std::to_string(exit_code) + ", " + meaning + ")";
    if (!output.empty()) m += ": " + output;
    return m;
  };
  switch (exit_code) {
    case 0:
    case 15:  // ISCSI_ERR_SESS_EXISTS
      return Status::Ok();
    case 24:  // ISCSI_ERR_LOGIN_AUTH_FAILED
      return PermissionDenied(message("authorization failure: the target refused the CHAP name or secret"));
    case 19:  // ISCSI_ERR_FATAL_LOGIN
      return NotFound(message("fatal login error: the target is not found, was removed or refuses this initiator"));
    case 21:  // ISCSI_ERR_NO_OBJS_FOUND
      return NotFound(message("no node record for this target and portal"));
    case 4:  // ISCSI_ERR_TRANS
      return Unavailable(message("cannot connect to the portal"));
    case 28:  // ISCSI_ERR_BUSY
      return Unavailable(message("device or resource busy"));
    case 29:  // ISCSI_ERR_AGAIN
      return Unavailable(message("failed, but a retry later may succeed"));
    case 8:  // ISCSI_ERR_TRANS_TIMEOUT
      return DeadlineExceeded(message("timed out connecting to the portal"));
    case 11:  // ISCSI_ERR_PDU_TIMEOUT
      return DeadlineExceeded(message("the target did not answer in time"));
    case 12:  // ISCSI_ERR_TRANS_NOT_FOUND
      return FailedPrecondition(message("the iSCSI transport is not loaded in the kernel or iscsid"));
    case 13:  // ISCSI_ERR_ACCESS
      return FailedPrecondition(message("no permission to reach iscsid"));
    case 18:  // ISCSI_ERR_ISCSID_COMM_ERR
    case 20:  // ISCSI_ERR_ISCSID_NOTCONN
      return FailedPrecondition(message("cannot talk to iscsid; is the iscsid service running?"));
    case 5:  // ISCSI_ERR_LOGIN
      return Internal(message("login failure"));
    default:
      return Internal(message("open-iscsi error"));
  }
}

}  // namespace csi_proxy::iscsi

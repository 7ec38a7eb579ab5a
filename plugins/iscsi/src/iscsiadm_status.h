// What an iscsiadm login's exit status means for a client: open-iscsi's codes (iscsiadm(8), EXIT STATUS) mapped to
// the gRPC codes a CSI driver acts on, as the SMB group maps mount.cifs' errors. Pure, so it is unit-tested.
#pragma once

#include <string>

#include "csi_proxy/status.hpp"

namespace csi_proxy::iscsi {

// The status of `iscsiadm -m node ... --login` that exited with `exit_code` (not 0), for the login to `what`
// ("iqn... at 127.0.0.1:3260"); `output` is the end of iscsiadm's output (it never holds a secret):
//   24 authorization failure (wrong CHAP name or secret)           PERMISSION_DENIED
//   19 fatal login error (the target is not found or was removed)  NOT_FOUND
//   21 no node record                                               NOT_FOUND
//    4 connect problem, 28 busy, 29 try again                       UNAVAILABLE
//    8 connection timer expired, 11 PDU timed out                   DEADLINE_EXCEEDED
//   12 transport not loaded, 18/20 iscsid unreachable, 13 no access FAILED_PRECONDITION
//   15 session already logged in                                    OK (ConnectTarget is idempotent)
//   anything else                                                   INTERNAL
// Every message names the login, the exit code and open-iscsi's meaning of it.
Status IscsiadmLoginStatus(int exit_code, const std::string& what, const std::string& output);

}  // namespace csi_proxy::iscsi

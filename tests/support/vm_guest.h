// Tests that change the machine's own systemd (units in /etc and /run, an install under /opt) run only in the VM
// lane's throwaway guest (tests/vm), never on a developer's or CI's host. The lane's guest script sets
// CSI_PROXY_VM_GUEST=1; systemd must also be PID 1 there.
#pragma once

#include <cstdlib>
#include <fstream>
#include <string>

namespace csi_proxy::testing {

// Empty when the test may run; otherwise why not, for GTEST_SKIP.
inline std::string WhyNotInVmGuest() {
  const char* guest = std::getenv("CSI_PROXY_VM_GUEST");
  if (guest == nullptr || std::string(guest) != "1") {
    return "changes the machine's systemd: runs only in the VM lane (tests/vm/run.sh), where systemd is PID 1 of a "
           "throwaway guest";
  }
  std::ifstream comm("/proc/1/comm");
  std::string init;
  std::getline(comm, init);
  if (init != "systemd") return "systemd is not PID 1 here (PID 1 is '" + init + "')";
  return "";
}

}  // namespace csi_proxy::testing

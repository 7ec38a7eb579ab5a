// See peer_process.h: SO_PEERPIDFD gives a pidfd of the process that connected. A pid is not reused while its
// process lives, so /proc/<pid>/status read before pidfd_send_signal(pidfd, 0) says the process still runs is that
// process's.
#include "abi/peer_process.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <sstream>

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77  // Linux 6.5; older C library headers lack it
#endif

namespace csi_proxy::host {
namespace {

bool ProcessRuns(int pidfd) { return syscall(SYS_pidfd_send_signal, pidfd, 0, nullptr, 0) == 0; }

struct ProcessIds {
  int64_t euid = -1;
  int64_t egid = -1;
  std::vector<uint32_t> groups;
};

// The effective ids and supplementary groups in /proc/<pid>/status; nullopt when it cannot be read.
std::optional<ProcessIds> IdsOf(int64_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  if (!in) return std::nullopt;
  ProcessIds ids;
  bool uid = false, gid = false;
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string key;
    fields >> key;
    int64_t real = -1;
    if (key == "Uid:") uid = static_cast<bool>(fields >> real >> ids.euid);
    if (key == "Gid:") gid = static_cast<bool>(fields >> real >> ids.egid);
    if (key == "Groups:") {
      for (uint32_t g; fields >> g;) ids.groups.push_back(g);
    }
  }
  if (!uid || !gid) return std::nullopt;
  return ids;
}

}  // namespace

bool PeerProcess::Supported() {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) return false;
  int pidfd = -1;
  socklen_t len = sizeof pidfd;
  bool supported = getsockopt(pair[0], SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) == 0 && pidfd >= 0;
  if (pidfd >= 0) close(pidfd);
  close(pair[0]);
  close(pair[1]);
  return supported;
}

std::shared_ptr<const PeerProcess> PeerProcess::Of(intptr_t socket) {
  int pidfd = -1;
  socklen_t len = sizeof pidfd;
  if (getsockopt(static_cast<int>(socket), SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) != 0 || pidfd < 0) return nullptr;
  return std::shared_ptr<const PeerProcess>(new PeerProcess(pidfd));
}

PeerProcess::~PeerProcess() { close(static_cast<int>(handle_)); }

std::optional<std::string> PeerProcess::Changed(const PeerCredentials& connected) const {
  const std::string who = "the process that connected (pid " + std::to_string(connected.pid) + ")";
  std::optional<ProcessIds> now = IdsOf(connected.pid);
  if (!ProcessRuns(static_cast<int>(handle_)) || !now) {
    return who + " has exited: another process uses its connection";
  }
  if (now->euid != connected.uid) {
    return who + " now runs as uid " + std::to_string(now->euid) + "; it connected as uid " +
           std::to_string(connected.uid);
  }
  std::vector<uint32_t> had = connected.groups, has = now->groups;
  std::sort(had.begin(), had.end());
  std::sort(has.begin(), has.end());
  if (now->egid != connected.gid || had != has) return who + " now runs with other groups than it connected with";
  return std::nullopt;
}

}  // namespace csi_proxy::host

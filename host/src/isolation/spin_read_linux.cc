// See spin_read.h.
#include "isolation/spin_read.h"

#include <sched.h>
#include <sys/socket.h>

#include <cerrno>

namespace csi_proxy::host {

ssize_t SpinRecv(int fd, char* buffer, size_t size, std::chrono::steady_clock::time_point until,
                 const std::function<bool()>& keep_spinning) {
  for (;;) {
    const ssize_t n = recv(fd, buffer, size, MSG_DONTWAIT);
    if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) return n;
    if (std::chrono::steady_clock::now() >= until || (keep_spinning && !keep_spinning())) {
      errno = EAGAIN;
      return -1;
    }
    sched_yield();
  }
}

}  // namespace csi_proxy::host

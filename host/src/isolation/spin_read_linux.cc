// See spin_read.h.
#include "isolation/spin_read.h"

#include <poll.h>
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

ssize_t SleepRecv(int fd, char* buffer, size_t size) {
  for (;;) {
    const ssize_t n = recv(fd, buffer, size, MSG_DONTWAIT);
    if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) return n;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, -1) < 0 && errno != EINTR) return -1;
  }
}

}  // namespace csi_proxy::host

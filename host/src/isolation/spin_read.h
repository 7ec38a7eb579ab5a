// A read that spins briefly before it sleeps, for the two ends of an isolated call's round trip: the host's thread
// that waits for a NONBLOCKING call's answer, and the runner's reading thread between calls that come back to back.
// On a machine whose idle CPUs halt (a virtual machine), waking a sleeping thread on another CPU is most of such a
// round trip; a reader that is still awake when the bytes come needs no wake-up. A spin is bounded, gives its CPU
// to any other thread that waits for that CPU at every try, and stops once spins keep finding nothing (SpinGate).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <functional>

namespace csi_proxy::host {

// Whether a reader spins before it sleeps this time: while its recent spins found what they waited for; after
// kMisses in a row found nothing (the peer takes longer than the spin, or the machine is busy), once every kProbe
// times only, so that such waits cost the reader about one spin per kProbe waits. The reader's own; not shared.
class SpinGate {
 public:
  bool Spin() { return misses_ < kMisses || ++probes_ % kProbe == 0; }
  void Spun(bool found) { misses_ = found ? 0 : misses_ + 1; }

 private:
  static constexpr int kMisses = 4;
  static constexpr unsigned kProbe = 32;
  int misses_ = 0;
  unsigned probes_ = 0;
};

// Reads what `fd` holds into `buffer` without sleeping, trying again until `until` (or until `keep_spinning`, when
// given, says no); between tries the thread yields its CPU (sched_yield) to any thread waiting for it, so that the
// peer it waits for runs at once when the scheduler put it on this CPU, and the spin delays no other thread by more
// than a try. recv's result: the bytes read, 0 at the end of the stream, or -1 with errno (EAGAIN: nothing came).
ssize_t SpinRecv(int fd, char* buffer, size_t size, std::chrono::steady_clock::time_point until,
                 const std::function<bool()>& keep_spinning = {});

// Reads what `fd` holds into `buffer`, sleeping until something comes; recv's result, as above. It sleeps in poll
// for input, not in recv: a thread asleep in a stream socket's recv is woken each time the peer reads from the
// other end (the kernel tells the socket's sleepers that there is room to write again), which poll filters out.
ssize_t SleepRecv(int fd, char* buffer, size_t size);

}  // namespace csi_proxy::host

// Gives back the resident pages the host touched only while loading, and the heap a burst of streams left free.
// Start-up and every reload run the libraries' initialisers and read their descriptors, and the kernel maps the file
// pages around every page touched (fault- around, 64 KiB at a time): a third of the idle host's resident memory is code
// and constants of gRPC, protobuf and the group libraries that no call uses again. Those pages are clean copies of the
// files, so unmapping them loses nothing: they stay in the page cache, and a page needed again comes back with a minor
// fault.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <thread>

namespace csi_proxy::host {

// Unmaps (MADV_DONTNEED) the resident pages of every private, read-only mapping of a regular file in this process
// that holds no page of its own: code and read-only data, never a section the loader relocated (those hold
// anonymous copies, which DONTNEED would discard). Returns the KiB of resident memory it released. On Windows
// (page_trim_windows.cc) the whole working set is trimmed instead.
size_t ReleaseFilePages();

// Gives the allocator's free memory back to the system: what a burst of streams or calls left free in the heap
// after it ended (glibc keeps freed memory of each thread's arena for reuse otherwise). Returns the KiB of resident
// memory the process shrank by.
size_t ReleaseFreeHeap();

// Runs ReleaseFilePages and ReleaseFreeHeap on a thread of its own once the host has been quiet for a while after
// a start, a reload or a burst of streams, so that a burst of reloads pays for it once.
class PageTrimmer {
 public:
  PageTrimmer();
  ~PageTrimmer();
  PageTrimmer(const PageTrimmer&) = delete;
  PageTrimmer& operator=(const PageTrimmer&) = delete;

  // Releases the pages `after` from now, unless Schedule is called again before (the later time wins).
  void Schedule(std::chrono::milliseconds after);
  // Cancels what is scheduled and waits for a release under way: the host's last log lines come after its.
  void Stop();

 private:
  void Run();

  std::mutex mu_;
  std::condition_variable changed_;
  bool stopping_ = false;                           // guarded by mu_
  std::chrono::steady_clock::time_point due_ = {};  // guarded by mu_; {} when nothing is scheduled
  std::thread thread_;
};

}  // namespace csi_proxy::host

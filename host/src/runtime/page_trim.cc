// See page_trim.h: when to release the pages; how is page_trim_linux.cc.
#include "runtime/page_trim.h"

#include <spdlog/spdlog.h>

namespace csi_proxy::host {

PageTrimmer::PageTrimmer() : thread_([this] { Run(); }) {}

PageTrimmer::~PageTrimmer() { Stop(); }

void PageTrimmer::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PageTrimmer::Schedule(std::chrono::milliseconds after) {
  {
    std::lock_guard lock(mu_);
    due_ = std::chrono::steady_clock::now() + after;
  }
  changed_.notify_all();
}

void PageTrimmer::Run() {
  std::unique_lock lock(mu_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || due_ != std::chrono::steady_clock::time_point{}; });
    if (stopping_) return;
    // Wait until due; a Schedule meanwhile moves the time.
    if (changed_.wait_until(lock, due_, [&] { return stopping_ || std::chrono::steady_clock::now() >= due_; })) {
      if (stopping_) return;
      due_ = {};
      lock.unlock();
      size_t kib = ReleaseFilePages();
      size_t heap_kib = ReleaseFreeHeap();
      spdlog::debug("released {} KiB of file pages touched while loading and {} KiB of free heap", kib, heap_kib);
      lock.lock();
    }
  }
}

}  // namespace csi_proxy::host

// See log_watcher.h.
#include "log_watcher.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

namespace csi_proxy::bench {

LogWatcher::LogWatcher(const std::string& path) {
  file_ = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  inotify_ = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (inotify_ >= 0) inotify_add_watch(inotify_, path.c_str(), IN_MODIFY);
  struct stat st {};
  if (file_ >= 0 && fstat(file_, &st) == 0) offset_ = st.st_size;
}

LogWatcher::~LogWatcher() {
  if (file_ >= 0) close(file_);
  if (inotify_ >= 0) close(inotify_);
}

void LogWatcher::ReadNew() {
  if (file_ < 0) return;
  char buf[8192];
  for (;;) {
    ssize_t n = pread(file_, buf, sizeof buf, offset_);
    if (n <= 0) break;
    offset_ += n;
    partial_.append(buf, static_cast<size_t>(n));
  }
  size_t start = 0;
  for (size_t nl = partial_.find('\n'); nl != std::string::npos; nl = partial_.find('\n', start)) {
    lines_.push_back(partial_.substr(start, nl - start));
    start = nl + 1;
  }
  partial_.erase(0, start);
}

std::optional<std::string> LogWatcher::WaitFor(const std::vector<std::string>& needles,
                                               std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    ReadNew();
    auto hit = std::find_if(lines_.begin(), lines_.end(), [&](const std::string& line) {
      return std::any_of(needles.begin(), needles.end(),
                         [&](const std::string& n) { return line.find(n) != std::string::npos; });
    });
    if (hit != lines_.end()) {
      std::string line = *hit;
      lines_.erase(lines_.begin(), hit + 1);
      return line;
    }
    lines_.clear();
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    // A write wakes us; the bounded wait covers a missed event (and a machine without inotify).
    pollfd p{inotify_, POLLIN, 0};
    if (inotify_ >= 0 && poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 50))) > 0) {
      char events[4096];
      while (read(inotify_, events, sizeof events) > 0) {
      }
    } else if (inotify_ < 0) {
      usleep(1000);
    }
  }
}

}  // namespace csi_proxy::bench

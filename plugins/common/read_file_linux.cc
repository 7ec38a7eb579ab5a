// Whole-file reads with O_CLOEXEC; see read_file_linux.h.
#include "read_file_linux.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "errno_linux.h"
#include "text.h"
#include "unique_fd_linux.h"

namespace csi_proxy::common {

StatusOr<std::string> ReadWholeFile(const std::string& path, const ReadFileOptions& options) {
  int flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | (options.no_follow ? O_NOFOLLOW : 0);
  UniqueFd fd(::openat(options.dir_fd, path.c_str(), flags));
  if (!fd.valid()) return ErrnoStatus(errno, "open " + QuoteValue(path));
  if (options.regular_only) {
    struct stat st;
    if (::fstat(fd.get(), &st) != 0) return ErrnoStatus(errno, "stat " + QuoteValue(path));
    if (!S_ISREG(st.st_mode)) return FailedPrecondition(QuoteValue(path) + " is not a regular file");
  }
  std::string content;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, "read " + QuoteValue(path));
    if (n == 0) break;
    content.append(buf, static_cast<size_t>(n));
    if (content.size() > options.max_bytes) {
      return Status(Code::kResourceExhausted,
                    QuoteValue(path) + " is larger than " + std::to_string(options.max_bytes) + " bytes");
    }
  }
  return content;
}

std::optional<std::string> ReadTrimmedFile(const std::string& path, size_t max_bytes) {
  auto content = ReadWholeFile(path, {.max_bytes = max_bytes});
  if (!content.ok()) return std::nullopt;
  std::string s = std::move(*content);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace csi_proxy::common

// See audit_sink.h: a descriptor opened O_APPEND | O_NONBLOCK (a FIFO's fullness is then EAGAIN, waited for
// with poll(2)), or standard error as it is.
#include "observe/audit_sink.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "config/trusted_files.h"

namespace csi_proxy::host {

StatusOr<std::unique_ptr<AuditSink>> AuditSink::Open(const std::string& path) {
  if (path == "-") return std::unique_ptr<AuditSink>(new AuditSink(path, STDERR_FILENO, false));
  // Through the trusted-file checks: lines others could rewrite or remove would be no record.
  CSI_PROXY_ASSIGN_OR_RETURN(TrustedFile file, OpenTrustedAppendFile(path, "the audit log"));
  return std::unique_ptr<AuditSink>(new AuditSink(path, file.Release(), true));
}

AuditSink::~AuditSink() {
  if (owned_) close(static_cast<int>(handle_));
}

Status AuditSink::Write(std::string_view& bytes, const std::function<bool()>& give_up) {
  const int fd = static_cast<int>(handle_);
  while (!bytes.empty()) {
    ssize_t n = write(fd, bytes.data(), bytes.size());
    if (n > 0) {
      bytes.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (give_up()) return Status(Code::kCancelled, "the audit log " + path_ + " took no bytes");
      pollfd p{fd, POLLOUT, 0};
      poll(&p, 1, 100);
      continue;
    }
    return Internal(std::string(n < 0 ? std::strerror(errno) : "nothing written"));
  }
  return Status::Ok();
}

}  // namespace csi_proxy::host

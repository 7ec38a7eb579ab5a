// See audit_sink.h: a file opened to append only (FILE_APPEND_DATA, so every write lands whole at the end) through
// the trusted-file checks, or the host's standard error. Windows has no non-blocking write to a file or a pipe
// here, so a sink that takes nothing holds up the writer thread, which is all it may hold up.
#include "observe/audit_sink.h"

#include <algorithm>

#include "config/trusted_files.h"
#include "config/win32_windows.h"

namespace csi_proxy::host {

StatusOr<std::unique_ptr<AuditSink>> AuditSink::Open(const std::string& path) {
  if (path == "-") {
    return std::unique_ptr<AuditSink>(
        new AuditSink(path, reinterpret_cast<intptr_t>(GetStdHandle(STD_ERROR_HANDLE)), false));
  }
  // Through the trusted-file checks: lines others could rewrite or remove would be no record.
  CSI_PROXY_ASSIGN_OR_RETURN(TrustedFile file, OpenTrustedAppendFile(path, "the audit log"));
  return std::unique_ptr<AuditSink>(new AuditSink(path, file.Release(), true));
}

AuditSink::~AuditSink() {
  if (owned_) CloseHandle(reinterpret_cast<HANDLE>(handle_));
}

Status AuditSink::Write(std::string_view& bytes, const std::function<bool()>&) {
  HANDLE handle = reinterpret_cast<HANDLE>(handle_);
  while (!bytes.empty()) {
    DWORD written = 0;
    DWORD chunk = static_cast<DWORD>(std::min<size_t>(bytes.size(), 1u << 20));
    if (!WriteFile(handle, bytes.data(), chunk, &written, nullptr)) return Internal(ErrorText(GetLastError()));
    if (written == 0) return Internal("nothing written");
    bytes.remove_prefix(written);
  }
  return Status::Ok();
}

}  // namespace csi_proxy::host

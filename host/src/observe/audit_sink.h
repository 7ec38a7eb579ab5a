// Where the audit log's lines go, as the operating system writes them: a file opened through the trusted-file
// checks, or the host's standard error (audit_sink_linux.cc; a Windows side goes beside it). Only the audit log's
// writer thread writes to it, so a sink that stops taking bytes (a full pipe, a hung network file system) holds
// up that thread and no call.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "csi_proxy/status.hpp"

namespace csi_proxy::host {

class AuditSink {
 public:
  // `path` is an absolute file path (opened to append, created 0600, through OpenTrustedAppendFile) or "-" for
  // standard error.
  static StatusOr<std::unique_ptr<AuditSink>> Open(const std::string& path);
  ~AuditSink();
  AuditSink(const AuditSink&) = delete;
  AuditSink& operator=(const AuditSink&) = delete;

  // Writes `bytes` whole, removing from it what was written. While the sink takes nothing (a full FIFO) it waits,
  // asking `give_up` every 100 ms; a sink the system cannot make wait (standard error, a file) may block the
  // calling thread. OK, or why the rest of `bytes` was not written: the system's error ("No space left on
  // device"), or CANCELLED when `give_up` said so.
  Status Write(std::string_view& bytes, const std::function<bool()>& give_up);

  const std::string& path() const { return path_; }

 private:
  AuditSink(std::string path, intptr_t handle, bool owned) : path_(std::move(path)), handle_(handle), owned_(owned) {}
  std::string path_;
  intptr_t handle_;
  bool owned_;  // closed with the sink (standard error is not)
};

}  // namespace csi_proxy::host

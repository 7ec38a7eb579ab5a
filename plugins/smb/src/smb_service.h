// The version-agnostic SMB service: validates every request field, applies upstream's semantics (one global
// mapping per share, reused while healthy, remade when unreachable; local_path becomes a link), serializes work
// per share and calls the OS backend. The versioned proto adapters only convert messages to these calls.
#pragma once

#include <memory>
#include <string>

#include "csi_proxy/status.hpp"
#include "keyed_mutex.h"
#include "path_policy.h"
#include "smb_backend.h"
#include "smb_types.h"

namespace csi_proxy::smb {

class SmbService {
 public:
  SmbService(std::unique_ptr<SmbBackend> backend, common::PathPolicy policy, LogSink log);

  Status NewSmbGlobalMapping(const std::string& remote_path, const std::string& local_path, const std::string& username,
                             const std::string& password);
  Status RemoveSmbGlobalMapping(const std::string& remote_path);

 private:
  void Log(LogLevel level, const std::string& message) const;

  std::unique_ptr<SmbBackend> backend_;
  common::PathPolicy policy_;
  LogSink log_;
  common::KeyedMutex share_locks_;  // one mapping operation per share at a time
};

}  // namespace csi_proxy::smb

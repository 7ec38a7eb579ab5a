// The parent directory of a mapping's local_path, where either system's backend makes its link, and the answers
// both give about it: a missing parent is NOT_FOUND naming local_path, an allowed root itself ALREADY_EXISTS.
#pragma once

#include <utility>

#include "csi_proxy/status.hpp"
#include "path_policy.h"
#include "text.h"

namespace csi_proxy::smb {

// `opened`: common::OpenParent(policy, local, "local_path") of the backend's system.
template <class OpenedParent>
StatusOr<OpenedParent> LinkParent(StatusOr<OpenedParent> opened, const common::ConfinedPath& local) {
  if (!opened.ok()) {
    if (opened.status().code() == Code::kNotFound) {
      return NotFound("the parent directory of local_path " + common::QuotePath(local.path) + " does not exist");
    }
    return opened.status();
  }
  if (opened->name.empty()) return AlreadyExists("local_path " + common::QuotePath(local.path) + " is an allowed root");
  return opened;
}

}  // namespace csi_proxy::smb

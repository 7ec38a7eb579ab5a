// Validation and per-path locking for the filesystem group; see filesystem_service.h.
#include "filesystem_service.h"

#include <algorithm>
#include <optional>
#include <string>

#include "text.h"

namespace csi_proxy::filesystem {

StatusOr<bool> FilesystemService::PathExists(std::string_view path) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto confined, policy_.Confine(path, "path"));
  auto lock = locks_.Hold(policy_.SameObjectKey(confined));
  return backend_->PathExists(confined);
}

Status FilesystemService::Mkdir(std::string_view path) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto confined, policy_.Confine(path, "path"));
  auto lock = locks_.Hold(policy_.SameObjectKey(confined));
  return backend_->MakeDirectories(confined);
}

Status FilesystemService::Rmdir(std::string_view path, bool force) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto confined, policy_.Confine(path, "path"));
  if (confined.is_root()) {
    return PermissionDenied("refusing to remove " + common::QuotePath(confined.path) +
                            ": it is an allowed root, not something below one");
  }
  auto lock = locks_.Hold(policy_.SameObjectKey(confined));
  return force ? backend_->RemoveTree(confined) : backend_->RemoveEntry(confined);
}

Status FilesystemService::RmdirContents(std::string_view path) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto confined, policy_.Confine(path, "path"));
  auto lock = locks_.Hold(policy_.SameObjectKey(confined));
  return backend_->RemoveContents(confined);
}

Status FilesystemService::CreateSymlink(std::string_view source_path, std::string_view target_path) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto source, policy_.Confine(source_path, "source_path"));
  CSI_PROXY_ASSIGN_OR_RETURN(auto target, policy_.Confine(target_path, "target_path"));
  // Both paths locked, always in the same order, so two opposite requests cannot deadlock.
  const std::string source_key = policy_.SameObjectKey(source), target_key = policy_.SameObjectKey(target);
  const std::string& first = std::min(source_key, target_key);
  const std::string& second = std::max(source_key, target_key);
  auto lock_first = locks_.Hold(first);
  std::optional<common::KeyedMutex::Lock> lock_second;
  if (second != first) lock_second.emplace(locks_, second);
  return backend_->CreateSymlink(source, target);
}

StatusOr<bool> FilesystemService::IsSymlink(std::string_view path) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto confined, policy_.Confine(path, "path"));
  auto lock = locks_.Hold(policy_.SameObjectKey(confined));
  return backend_->IsSymlink(confined);
}

}  // namespace csi_proxy::filesystem

// The users of SMB global mappings, counted from records and what is on disk; see smb_mapping_users_linux.h.
#include "smb_mapping_users_linux.h"

#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <set>

#include "confined_open_linux.h"
#include "errno_linux.h"
#include "mount_table_linux.h"

namespace csi_proxy::common {
namespace {

constexpr const char* kLinkPrefix = "link:";
constexpr const char* kPinPrefix = "pin:";

bool IsUnder(const std::string& path, const std::string& dir) {
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/');
}

// The file system type mounted on top at `mount_point` ("" when nothing is).
StatusOr<std::string> MountedType(const std::string& mount_point) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto table, ReadMountTable());
  std::string type;
  for (const auto& entry : table) {
    if (entry.target == mount_point) type = entry.fs_type;  // the last one is on top
  }
  return type;
}

}  // namespace

SmbMappingUsers::SmbMappingUsers(const std::string& state_dir, PathPolicy policy, sdk::LogSink log)
    : records_(RecordsDir(state_dir)), policy_(std::move(policy)), log_(std::move(log)) {}

StatusOr<RecordLock> SmbMappingUsers::Lock(const std::string& mapping_key) const {
  return records_.Lock("mapping:" + mapping_key);
}

StatusOr<RecordLock> SmbMappingUsers::LockDirectories() const { return records_.Lock("directories"); }

Status SmbMappingUsers::AddLink(const std::string& local_path, const std::string& link_text,
                                const SmbMapping& mapping) const {
  return records_.Put(kLinkPrefix + local_path, {{"mapping", mapping.key},
                                                 {"mount_point", mapping.mount_point},
                                                 {"local_path", local_path},
                                                 {"link_text", link_text}});
}

Status SmbMappingUsers::Pin(const SmbMapping& mapping) const {
  return records_.Put(kPinPrefix + mapping.key, {{"mapping", mapping.key}, {"mount_point", mapping.mount_point}});
}

Status SmbMappingUsers::Unpin(const std::string& mapping_key) const {
  return records_.Remove(kPinPrefix + mapping_key);
}

bool SmbMappingUsers::LinkIsLive(const RecordFields& record) const {
  auto confined = policy_.Confine(record.at("local_path"), "local_path");
  if (!confined.ok()) return false;  // no longer under the allowed roots: not a link anyone can use through us
  auto parent = OpenParent(policy_, *confined, "local_path");
  if (!parent.ok())
    return parent.status().code() != Code::kNotFound && parent.status().code() != Code::kPermissionDenied;
  if (parent->name.empty()) return false;
  char buf[4096];
  ssize_t n = readlinkat(parent->dir.get(), parent->name.c_str(), buf, sizeof buf);
  if (n < 0) return errno != ENOENT && errno != EINVAL;  // EINVAL: something else than a symlink is there now
  return std::string(buf, static_cast<size_t>(n)) == record.at("link_text");
}

StatusOr<SmbMappingUse> SmbMappingUsers::Users(const std::string& mapping_key) const {
  CSI_PROXY_ASSIGN_OR_RETURN(auto records, records_.List());
  SmbMappingUse use;
  for (auto& record : records) {
    if (record["mapping"] != mapping_key) continue;
    const std::string& key = record["key"];
    if (key.rfind(kPinPrefix, 0) == 0) {
      use.pinned = true;
    } else if (key.rfind(kLinkPrefix, 0) == 0 && record.count("local_path") && record.count("link_text")) {
      if (LinkIsLive(record)) {
        use.links.push_back(record["local_path"]);
      } else {
        CSI_PROXY_RETURN_IF_ERROR(records_.Remove(key));  // its link is gone: no longer a user
      }
    }
  }
  std::sort(use.links.begin(), use.links.end());
  return use;
}

StatusOr<std::vector<std::string>> SmbMappingUsers::ReleaseLinksGoneUnder(const std::string& path) const {
  std::vector<std::string> unmapped;
  CSI_PROXY_ASSIGN_OR_RETURN(auto records, records_.List());
  std::set<std::string> touched;  // mappings that lost a link here
  for (auto& record : records) {
    if (record["key"].rfind(kLinkPrefix, 0) != 0 || !record.count("local_path") || !record.count("link_text")) continue;
    if (IsUnder(record["local_path"], path) && !LinkIsLive(record)) touched.insert(record["mapping"]);
  }
  for (const auto& key : touched) {
    CSI_PROXY_ASSIGN_OR_RETURN(auto lock, Lock(key));
    // Counted again under the lock: the SMB group may have linked the path anew meanwhile.
    CSI_PROXY_ASSIGN_OR_RETURN(auto use, Users(key));
    if (use.used()) {
      if (log_) {
        log_(sdk::LogLevel::kInfo, "the SMB mapping " + key + " stays: " + std::to_string(use.links.size()) +
                                       " local_path links" + (use.pinned ? " and a mapping without one" : "") +
                                       " still use it");
      }
      continue;
    }
    std::string mount_point;
    for (auto& record : records) {
      if (record["mapping"] == key) mount_point = record["mount_point"];
    }
    if (mount_point.empty()) continue;
    CSI_PROXY_RETURN_IF_ERROR(UnmountSmbMount(mount_point).WithContext("unmapping " + key));
    {
      // The server's directory goes with its last share, as the SMB group removes it.
      CSI_PROXY_ASSIGN_OR_RETURN(auto dirs, LockDirectories());
      rmdir(mount_point.substr(0, mount_point.rfind('/')).c_str());
    }
    if (log_)
      log_(sdk::LogLevel::kInfo, "unmapped " + key + " from " + mount_point + ": its last local_path link is gone");
    unmapped.push_back(key);
  }
  return unmapped;
}

Status UnmountSmbMount(const std::string& mount_point) {
  // Lazy: the mapping disappears at once even if files are open or the server is gone (upstream removes with
  // Force). Several stacked mounts are all removed.
  for (int i = 0; i < 16; ++i) {
    CSI_PROXY_ASSIGN_OR_RETURN(auto mounted, MountedType(mount_point));
    if (mounted.empty()) break;
    if (mounted != "cifs" && mounted != "smb3") {
      return Internal(mount_point + " holds a " + mounted + " mount, not an SMB mapping");
    }
    if (umount2(mount_point.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) != 0 && errno != EINVAL && errno != ENOENT) {
      return Internal(ErrnoMessage("unmounting " + mount_point, errno));
    }
  }
  if (rmdir(mount_point.c_str()) != 0 && errno != ENOENT && errno != ENOTEMPTY) {
    return Internal(ErrnoMessage("removing the mount point " + mount_point, errno));
  }
  return Status::Ok();
}

}  // namespace csi_proxy::common

// The users of SMB global mappings, counted from records and what is on disk; see smb_mapping_users.h.
#include "smb_mapping_users.h"

#include <algorithm>
#include <set>

#include "text.h"

namespace csi_proxy::common {
namespace {

constexpr const char* kLinkPrefix = "link:";
constexpr const char* kPinPrefix = "pin:";

}  // namespace

SmbMappingUsers::SmbMappingUsers(const std::string& state_dir, PathPolicy policy, sdk::LogSink log, System system)
    : records_(RecordsDir(state_dir)), policy_(std::move(policy)), log_(std::move(log)), system_(std::move(system)) {}

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
  const std::string& local_path = record.at("local_path");
  const std::string& link_text = record.at("link_text");
  return system_.link_is_live ? system_.link_is_live(local_path, link_text) : LinkIsLiveHere(local_path, link_text);
}

bool SmbMappingUsers::IsUnder(const std::string& path, const std::string& dir) const {
  const std::vector<std::string> inner = policy_.Split(path), outer = policy_.Split(dir);
  if (inner.size() < outer.size()) return false;
  const bool ignore_case = policy_.syntax() == PathSyntax::kWindows;
  for (size_t i = 0; i < outer.size(); ++i) {
    if (ignore_case ? AsciiLower(inner[i]) != AsciiLower(outer[i]) : inner[i] != outer[i]) return false;
  }
  return true;
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
    SmbMapping mapping{key, ""};
    for (auto& record : records) {
      if (record["mapping"] == key) mapping.mount_point = record["mount_point"];
    }
    if (mapping.mount_point.empty()) continue;
    CSI_PROXY_RETURN_IF_ERROR(
        (system_.unmap ? system_.unmap(mapping) : UnmapHere(mapping)).WithContext("unmapping " + key));
    if (log_) {
      log_(sdk::LogLevel::kInfo,
           "unmapped " + key + " from " + mapping.mount_point + ": its last local_path link is gone");
    }
    unmapped.push_back(key);
  }
  return unmapped;
}

void SmbMappingUsers::ReleaseAfterRemoval(const std::string& state_dir, const PathPolicy& policy,
                                          const sdk::LogSink& log, const std::string& path) {
  if (state_dir.empty()) return;
  auto released = SmbMappingUsers(state_dir, policy, log).ReleaseLinksGoneUnder(path);
  if (!released.ok() && log) {
    log(sdk::LogLevel::kWarn,
        "removed " + QuotePath(path) +
            ", but could not release the SMB mappings its links used: " + released.status().message());
  }
}

}  // namespace csi_proxy::common

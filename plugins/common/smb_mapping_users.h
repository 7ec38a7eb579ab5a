// Who uses an SMB global mapping, shared by the SMB group (which maps shares and makes local_path links) and the
// filesystem group (whose Rmdir removes those links), so that a mapping another volume still uses is never
// unmapped and one nobody uses any more is.
//
// Several volumes on a node often use one share, and drivers differ (csi-driver-smb counts references in files of
// its own, azurefile never removes a mapping, Trident removes it unconditionally). The server knows which
// local_path links point at a mapping, so it counts. A mapping's users are:
//   - every live local_path link to it: a record the SMB group wrote when it made the link, whose link is still
//     on disk with the recorded text (a record whose link is gone is dropped when counted);
//   - a mapping made without a local_path ("pinned"), until a RemoveSmbGlobalMapping of it.
// RemoveSmbGlobalMapping unmaps only a mapping without users (it unpins first); the filesystem group, after it
// removed a link (or a tree holding links), unmaps a mapping whose last user that was. Records live in
// <state_dir>/smb-mapping-users (state_records.h), and every change of a mapping's users happens under a lock
// file per mapping that both groups take, so the count survives a restart of the proxy and neither group races
// the other. The counting is the same on both systems; what a link is and how a mapping goes are each system's
// (smb_mapping_users_linux.cc: a symlink to the CIFS mount, detached; smb_mapping_users_windows.cc: a directory
// symlink to the UNC path, the MSFT_SmbGlobalMapping removed).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "csi_proxy/log.hpp"
#include "csi_proxy/status.hpp"
#include "path_policy.h"
#include "state_records.h"

namespace csi_proxy::common {

// A mapping: its key ("//server/share", lowercase) and where the share is reached: on Linux the mount point of
// its CIFS mount, on Windows the global mapping's remote path ("\\server\share").
struct SmbMapping {
  std::string key;
  std::string mount_point;
};

struct SmbMappingUse {
  std::vector<std::string> links;  // the live local_path links, sorted
  bool pinned = false;             // mapped without a local_path and not removed since
  bool used() const { return pinned || !links.empty(); }
};

class SmbMappingUsers {
 public:
  // What the counting asks of the system. An empty member is this system's own: whether the link recorded at
  // `local_path` is still there with `link_text` (unsure counts as live: a mapping is never unmapped on a guess),
  // and how a mapping nobody uses any more goes.
  struct System {
    std::function<bool(const std::string& local_path, const std::string& link_text)> link_is_live;
    std::function<Status(const SmbMapping& mapping)> unmap;
  };

  // `policy` confines the recorded link paths when they are looked at (the groups' allowed roots).
  SmbMappingUsers(const std::string& state_dir, PathPolicy policy, sdk::LogSink log = {}, System system = {});

  static std::string RecordsDir(const std::string& state_dir) {
    return state_dir + (kNativePathSyntax == PathSyntax::kWindows ? "\\" : "/") + "smb-mapping-users";
  }

  // The lock every change of `mapping_key`'s users (and its unmapping) happens under.
  StatusOr<RecordLock> Lock(const std::string& mapping_key) const;
  // The lock under which the per-server directories of the mount root are made and removed (by either group), so
  // that one group never removes a server's directory the other is about to mount a share in.
  StatusOr<RecordLock> LockDirectories() const;

  // Records a local_path link (at `local_path`, a confined path, with the text `link_text`) to the mapping.
  Status AddLink(const std::string& local_path, const std::string& link_text, const SmbMapping& mapping) const;
  // Records that the mapping was made without a local_path; Unpin forgets that.
  Status Pin(const SmbMapping& mapping) const;
  Status Unpin(const std::string& mapping_key) const;

  // The mapping's users now; records of links that are gone are dropped. Call with the mapping's Lock held.
  StatusOr<SmbMappingUse> Users(const std::string& mapping_key) const;

  // For the filesystem group, after it removed `path` (a link, or a tree that held links): every recorded link at
  // or below `path` that is gone stops counting, and a mapping left without users is unmapped. Returns the keys of
  // the mappings it unmapped.
  StatusOr<std::vector<std::string>> ReleaseLinksGoneUnder(const std::string& path) const;
  // ReleaseLinksGoneUnder after the filesystem group removed `path`, on either system. The removal itself
  // succeeded: a mapping that cannot be released now stays mapped (never the unsafe way), with a warning in the
  // log, and a RemoveSmbGlobalMapping of it unmaps it later. Nothing happens without a state_dir.
  static void ReleaseAfterRemoval(const std::string& state_dir, const PathPolicy& policy, const sdk::LogSink& log,
                                  const std::string& path);

 private:
  bool LinkIsLive(const RecordFields& record) const;
  // `path` is `dir` or lies below it, component by component in the policy's syntax.
  bool IsUnder(const std::string& path, const std::string& dir) const;
  // This system's own answers (smb_mapping_users_<os>.cc), where System leaves them empty.
  bool LinkIsLiveHere(const std::string& local_path, const std::string& link_text) const;
  Status UnmapHere(const SmbMapping& mapping) const;

  StateRecords records_;
  PathPolicy policy_;
  sdk::LogSink log_;
  System system_;
};

}  // namespace csi_proxy::common

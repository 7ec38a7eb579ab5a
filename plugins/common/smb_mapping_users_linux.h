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
// <state_dir>/smb-mapping-users (state_records_linux.h), and every change of a mapping's users happens under a
// lock file per mapping that both groups take, so the count survives a restart of the proxy and neither group
// races the other.
#pragma once

#include <string>
#include <vector>

#include "csi_proxy/log.hpp"
#include "csi_proxy/status.hpp"
#include "path_policy.h"
#include "state_records_linux.h"

namespace csi_proxy::common {

// A mapping: its key ("//server/share", lowercase) and where its share is mounted.
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
  // `policy` confines the recorded link paths when they are looked at (the groups' allowed roots).
  SmbMappingUsers(const std::string& state_dir, PathPolicy policy, sdk::LogSink log = {});

  static std::string RecordsDir(const std::string& state_dir) { return state_dir + "/smb-mapping-users"; }

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
  // or below `path` that is gone stops counting, and a mapping left without users is unmounted (UnmountSmbMount).
  // Returns the keys of the mappings it unmounted.
  StatusOr<std::vector<std::string>> ReleaseLinksGoneUnder(const std::string& path) const;

 private:
  // Whether the link recorded in `record` is still on disk with its text. Unsure (an error other than "not
  // there") counts as live: a mapping is never unmapped on a guess.
  bool LinkIsLive(const RecordFields& record) const;

  StateRecords records_;
  PathPolicy policy_;
  sdk::LogSink log_;
};

// Unmounts the SMB mapping mounted at `mount_point` (every stacked mount, lazily: open files or a dead server
// cannot block it) and removes the mount point directory (the share's). Success when nothing is mounted there;
// INTERNAL for a mount point that holds anything but cifs.
Status UnmountSmbMount(const std::string& mount_point);

}  // namespace csi_proxy::common

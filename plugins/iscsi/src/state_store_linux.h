// What the Linux iSCSI backend must remember that the kernel does not: the registered target portals (Windows
// keeps them in its iSCSI service) and the initiator-wide mutual CHAP secret. Kept in a private directory
// (mode 0700); every change is written atomically (temp file, fsync, rename, fsync of the directory, mode 0600),
// so a crash leaves either the old or the new state, and the state survives a restart of the proxy.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "csi_proxy/status.hpp"
#include "iscsi_types.h"

namespace csi_proxy::iscsi {

class IscsiStateStore {
 public:
  // The largest state file the loader reads; the writer never writes a larger one, so whatever the API stored
  // loads at the next start.
  static constexpr size_t kMaxFileBytes = 1u << 20;
  // The most portals `max_portals` may allow: a portal line is at most 253 (host name) + 1 + 5 + 1 bytes, so
  // this many always fit in kMaxFileBytes.
  static constexpr size_t kMaxPortalsLimit = 4000;
  static constexpr size_t kDefaultMaxPortals = 256;

  // Creates `dir` (mode 0700, parents 0755) if needed and loads the state in it. Refuses a path that is not an
  // absolute directory owned by this user, a symlink in its place, or a state file it cannot parse.
  // `max_portals` (1..kMaxPortalsLimit) caps AddPortal; a file written under a larger cap still loads.
  // With `check_only` (a configuration check, perhaps beside a host writing the same directory) it changes
  // nothing: no directory created or restricted, no leftover temporary removed (it may be a write in progress);
  // an existing directory is checked and its files parsed, a missing one reads as empty, and the store refuses
  // every change.
  static StatusOr<std::unique_ptr<IscsiStateStore>> Open(const std::string& dir,
                                                         size_t max_portals = kDefaultMaxPortals,
                                                         bool check_only = false);
  ~IscsiStateStore();
  IscsiStateStore(const IscsiStateStore&) = delete;
  IscsiStateStore& operator=(const IscsiStateStore&) = delete;

  // Registered portals in the order they were added.
  std::vector<Portal> Portals() const;
  bool HasPortal(const Portal& portal) const;
  // Adds the portal; adding a registered portal again changes nothing. RESOURCE_EXHAUSTED when `max_portals`
  // portals are registered already.
  Status AddPortal(const Portal& portal);
  // Removes the portal; returns NOT_FOUND if it was not registered (the state is unchanged then).
  Status RemovePortal(const Portal& portal);

  std::optional<std::string> MutualChapSecret() const;
  // Stores the secret; an empty secret clears it.
  Status SetMutualChapSecret(const std::string& secret);

  const std::string& dir() const { return dir_; }

  // File names inside the state directory.
  static constexpr const char* kPortalsFile = "portals";
  static constexpr const char* kMutualChapSecretFile = "mutual-chap-secret";

 private:
  IscsiStateStore(std::string dir, int dir_fd, size_t max_portals, bool check_only)
      : dir_(std::move(dir)), dir_fd_(dir_fd), max_portals_(max_portals), check_only_(check_only) {}
  Status Load();
  Status WritePortals(const std::vector<Portal>& portals);

  const std::string dir_;
  const int dir_fd_;  // -1: a check found no directory (nothing to read)
  const size_t max_portals_;
  const bool check_only_;
  void PublishPortalsLocked();

  mutable std::mutex mu_;  // serialises changes; held across the state file's write and fsync
  std::vector<Portal> portals_;
  // What Portals() reads: swapped after a change is on disk, under a lock that is never held across I/O, so that
  // ListTargetPortals answers from memory (CSI_PROXY_METHOD_NONBLOCKING) even while a change is being written.
  mutable std::mutex published_mu_;
  std::shared_ptr<const std::vector<Portal>> published_ = std::make_shared<const std::vector<Portal>>();
  std::optional<std::string> mutual_chap_secret_;
};

}  // namespace csi_proxy::iscsi

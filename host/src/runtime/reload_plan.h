// What a reload changes, worked out before anything is touched: a pure function of the running configuration, the
// new one, what each running group instance was loaded from and the library files as they are now. The host
// runtime applies the plan (HostRuntime::Reload); tests check it without a process.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "config/config.h"

namespace csi_proxy::host {

struct ReloadPlan {
  // The configuration the host runs with once the plan is applied: the new one, except that the [host] keys read
  // only at start keep their running values.
  HostConfig config;
  // [host] keys whose new value takes effect now (HostKeyReload::kNow), in table order.
  std::vector<std::string> host_keys_now;
  // What the reload report says beside what it applies: the keys that wait for the next start, and the notes of
  // keys that take effect only in part.
  std::vector<std::string> notes;
  // Groups by their [groups.<name>] table, in name order:
  std::vector<std::string> add;      // enabled now and not running: load and serve
  std::vector<std::string> remove;   // running and no longer enabled: stop serving, drain, unload
  std::vector<std::string> replace;  // running with another fingerprint: load anew beside the old instance
  std::vector<std::string> keep;     // running and unchanged (`required` may change: it needs no new instance)
  // Groups that stay whose authorization lists change: their endpoints are bound again with the new lists, the
  // library stays. Also lists a group being replaced whose lists change: its new instance is served with them, and
  // should the replacement fail, the old one is bound again with them.
  std::vector<std::string> rebind;
};

// Plans the move from `running` to `next`. `instances` maps each running group to the fingerprint it was loaded
// with (GroupRuntime::fingerprint); `library_identities` maps library paths to LibraryFileIdentity as it is now
// (a path missing from it has an empty identity).
ReloadPlan PlanReload(const HostConfig& running, const HostConfig& next,
                      const std::map<std::string, std::string>& instances,
                      const std::map<std::string, std::string>& library_identities);

}  // namespace csi_proxy::host

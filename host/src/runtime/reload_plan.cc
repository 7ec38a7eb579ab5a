// See reload_plan.h.
#include "runtime/reload_plan.h"

#include "config/access_lists.h"
#include "config/host_keys.h"
#include "serving/group_runtime.h"

namespace csi_proxy::host {
namespace {

// "a", "a and b", "a, b and c".
std::string Enumerate(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == items.size() ? " and " : ", ") + items[i];
  }
  return out;
}

std::map<std::string, const GroupConfig*> EnabledGroups(const HostConfig& config) {
  std::map<std::string, const GroupConfig*> out;
  for (const auto& g : config.groups) {
    if (g.enabled) out[g.name] = &g;
  }
  return out;
}

}  // namespace

ReloadPlan PlanReload(const HostConfig& running, const HostConfig& next,
                      const std::map<std::string, std::string>& instances,
                      const std::map<std::string, std::string>& library_identities) {
  ReloadPlan plan;
  plan.config = next;
  std::vector<std::string> at_next_start;
  for (const HostKey& key : HostKeys()) {
    if (SameHostKeyValue(key, running, next)) continue;
    if (!key.reload_note.empty()) plan.notes.emplace_back(key.reload_note);
    switch (key.reload) {
      case HostKeyReload::kNow:
        plan.host_keys_now.emplace_back(key.name);
        break;
      case HostKeyReload::kAtNextStart:
        CopyHostKeyValue(key, running, plan.config);
        at_next_start.emplace_back(key.name);
        break;
      case HostKeyReload::kThroughGroups:  // seen in the fingerprints below
      case HostKeyReload::kAuthorization:  // seen in the lists below
        break;
    }
  }
  if (!at_next_start.empty()) {
    plan.notes.insert(plan.notes.begin(), Enumerate(at_next_start) + (at_next_start.size() == 1 ? " takes" : " take") +
                                              " effect at the next start");
  }

  const auto was = EnabledGroups(running);
  const auto wanted = EnabledGroups(plan.config);
  for (const auto& [name, fingerprint] : instances) {
    auto it = wanted.find(name);
    if (it == wanted.end()) {
      plan.remove.push_back(name);
      continue;
    }
    const GroupConfig& group = *it->second;
    auto identity = library_identities.find(group.library);
    std::string now = GroupRuntime::Fingerprint(
        group, plan.config, identity != library_identities.end() ? identity->second : std::string());
    (now == fingerprint ? plan.keep : plan.replace).push_back(name);
    // The lists are the host's, outside the fingerprint.
    auto before = was.find(name);
    AccessLists old_lists =
        MergeAccessLists(running.access, before != was.end() ? before->second->access : AccessLists{});
    if (MergeAccessLists(plan.config.access, group.access) != old_lists) plan.rebind.push_back(name);
  }
  for (const auto& [name, group] : wanted) {
    if (!instances.count(name)) plan.add.push_back(name);
  }
  return plan;
}

}  // namespace csi_proxy::host

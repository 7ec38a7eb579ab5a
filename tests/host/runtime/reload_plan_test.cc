// What a reload changes, planned without a process (runtime/reload_plan.h): which [host] keys apply now, which wait
// for the next start, and which groups are added, removed, replaced, kept or bound again.
#include "runtime/reload_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "serving/group_runtime.h"

namespace csi_proxy::host {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

HostConfig Parse(const std::string& text) {
  auto c = ParseConfig(text, "test.toml", "/opt/csi-proxy/bin");
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? *c : HostConfig{};
}

// The libraries as the plan sees them: every path has identity "v1" unless `files` says otherwise.
struct Node {
  HostConfig running;
  std::map<std::string, std::string> files;

  std::string Identity(const std::string& library) const {
    auto it = files.find(library);
    return it == files.end() ? "v1" : it->second;
  }
  // Each enabled group of `running` as loaded from the files as they were (identity "v1").
  std::map<std::string, std::string> Instances() const {
    std::map<std::string, std::string> out;
    for (const auto& g : running.groups) {
      if (g.enabled) out[g.name] = GroupRuntime::Fingerprint(g, running, "v1");
    }
    return out;
  }
  ReloadPlan Plan(const HostConfig& next) const {
    std::map<std::string, std::string> identities;
    for (const auto& g : next.groups) identities[g.library] = Identity(g.library);
    return PlanReload(running, next, Instances(), identities);
  }
};

constexpr const char* kThreeGroups = R"(
[groups.disk]
[groups.smb]
timeout = 5
[groups.volume]
)";

TEST(ReloadPlan, TheSameFileChangesNothing) {
  Node node{Parse(kThreeGroups)};
  ReloadPlan plan = node.Plan(Parse(kThreeGroups));
  EXPECT_THAT(plan.keep, ElementsAre("disk", "smb", "volume"));
  EXPECT_THAT(plan.add, IsEmpty());
  EXPECT_THAT(plan.remove, IsEmpty());
  EXPECT_THAT(plan.replace, IsEmpty());
  EXPECT_THAT(plan.rebind, IsEmpty());
  EXPECT_THAT(plan.host_keys_now, IsEmpty());
  EXPECT_THAT(plan.notes, IsEmpty());
}

TEST(ReloadPlan, GroupsAreAddedRemovedAndReplacedByWhatChangedInTheirTablesAndFiles) {
  Node node{Parse(kThreeGroups)};
  node.files[node.running.plugin_dir + "/libcsi-proxy-volume.so"] = "v2";  // a new build at the same path
  ReloadPlan plan = node.Plan(Parse(R"(
[groups.disk]
enabled = false
[groups.smb]
timeout = 6
[groups.volume]
[groups.iscsi]
)"));
  EXPECT_THAT(plan.remove, ElementsAre("disk"));            // disabled
  EXPECT_THAT(plan.replace, ElementsAre("smb", "volume"));  // its own key; its library file
  EXPECT_THAT(plan.add, ElementsAre("iscsi"));
  EXPECT_THAT(plan.keep, IsEmpty());
  EXPECT_THAT(plan.rebind, IsEmpty());
}

TEST(ReloadPlan, AGroupMissingFromTheFileIsRemoved) {
  Node node{Parse(kThreeGroups)};
  ReloadPlan plan = node.Plan(Parse("[groups.smb]\ntimeout = 5\n[groups.volume]\n"));
  EXPECT_THAT(plan.remove, ElementsAre("disk"));
  EXPECT_THAT(plan.keep, ElementsAre("smb", "volume"));
}

TEST(ReloadPlan, RequiredChangesNoInstance) {
  Node node{Parse(kThreeGroups)};
  ReloadPlan plan = node.Plan(Parse("[groups.disk]\nrequired = true\n[groups.smb]\ntimeout = 5\n[groups.volume]\n"));
  EXPECT_THAT(plan.keep, ElementsAre("disk", "smb", "volume"));
  EXPECT_THAT(plan.replace, IsEmpty());
}

TEST(ReloadPlan, WhatTheHostHandsTheGroupsReplacesEveryGroup) {
  Node node{Parse(kThreeGroups)};
  ReloadPlan plan = node.Plan(Parse(std::string("[host]\nkubelet_path = \"/var/lib/k8s\"\n") + kThreeGroups));
  EXPECT_THAT(plan.replace, ElementsAre("disk", "smb", "volume"));
  EXPECT_THAT(plan.host_keys_now, IsEmpty());
  EXPECT_THAT(plan.notes, IsEmpty());
  EXPECT_EQ(plan.config.kubelet_path, "/var/lib/k8s");
}

TEST(ReloadPlan, TheDefaultBudgetReplacesOnlyTheGroupsWithoutTheirOwn) {
  Node node{Parse("[groups.disk]\n[groups.smb]\nworkers = 4\n")};
  ReloadPlan plan = node.Plan(Parse("[host]\nworkers = 8\n[groups.disk]\n[groups.smb]\nworkers = 4\n"));
  EXPECT_THAT(plan.replace, ElementsAre("disk"));
  EXPECT_THAT(plan.keep, ElementsAre("smb"));
}

TEST(ReloadPlan, ChangedListsRebindAGroupWithoutReplacingIt) {
  Node node{Parse(std::string("[host]\nallowed_uids = [0]\n") + kThreeGroups)};
  // [host]'s list changes for every group but smb, whose own table now gives one.
  ReloadPlan plan = node.Plan(Parse(R"(
[host]
allowed_uids = [0, 1000]
[groups.disk]
[groups.smb]
timeout = 5
allowed_uids = [0]
[groups.volume]
)"));
  EXPECT_THAT(plan.keep, ElementsAre("disk", "smb", "volume"));
  EXPECT_THAT(plan.rebind, ElementsAre("disk", "volume"));
  EXPECT_THAT(plan.replace, IsEmpty());
}

TEST(ReloadPlan, AGroupReplacedWhoseListsChangeIsAlsoRebound) {
  Node node{Parse("[groups.smb]\ntimeout = 5\n")};
  ReloadPlan plan = node.Plan(Parse("[groups.smb]\ntimeout = 6\nread_only_gids = [0]\n"));
  EXPECT_THAT(plan.replace, ElementsAre("smb"));
  EXPECT_THAT(plan.rebind, ElementsAre("smb"));  // should the new instance fail, the old one takes the lists
}

TEST(ReloadPlan, KeysReadOnlyAtStartKeepTheirRunningValueAndSaySo) {
  Node node{Parse("[host]\nendpoint_dir = \"/run/a\"\nidle_timeout_seconds = 60\nmax_connections = 100\n")};
  ReloadPlan plan = node.Plan(Parse(R"(
[host]
endpoint_dir = "/run/b"
idle_timeout_seconds = 30
max_connections = 100
metrics_address = "127.0.0.1:9180"
)"));
  EXPECT_EQ(plan.config.endpoint_dir, "/run/a");
  EXPECT_EQ(plan.config.idle_timeout, std::chrono::seconds(60));
  EXPECT_EQ(plan.config.metrics_address, "");
  EXPECT_THAT(plan.notes,
              ElementsAre("endpoint_dir, admin_socket, metrics_address and idle_timeout_seconds take effect at the "
                          "next start"));
  EXPECT_THAT(plan.host_keys_now, IsEmpty());
}

TEST(ReloadPlan, KeysThatApplyNowAreListedInTheTablesOrder) {
  Node node{Parse("")};
  ReloadPlan plan = node.Plan(Parse(R"(
[host]
shutdown_timeout_seconds = 5
audit_log = "-"
log_level = "debug"
log_format = "json"
)"));
  EXPECT_THAT(plan.host_keys_now, ElementsAre("log_level", "log_format", "audit_log", "shutdown_timeout_seconds"));
  EXPECT_EQ(plan.config.log_level, "debug");
  EXPECT_EQ(plan.config.shutdown_timeout, std::chrono::seconds(5));
  EXPECT_THAT(plan.notes, ElementsAre("log_format takes effect for the host log at the next start (the audit log "
                                      "follows it now)"));
}

}  // namespace
}  // namespace csi_proxy::host

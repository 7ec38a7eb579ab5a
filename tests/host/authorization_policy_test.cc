// The authorization rule on its own: which lists apply to a group ([host]'s or its table's), and who passes which
// method.
#include "serving/authorization.h"

#include <gtest/gtest.h>

namespace csi_proxy::host {
namespace {

const MethodHandler kMutating{};
const MethodHandler kReadOnly{nullptr, nullptr, CSI_PROXY_METHOD_READ_ONLY};

PeerCredentials Peer(int64_t uid, int64_t gid, std::vector<uint32_t> groups = {}) {
  return PeerCredentials{42, uid, gid, std::move(groups)};
}

TEST(AuthorizationPolicy, NoListLeavesTheGroupOpen) { EXPECT_EQ(Authorization::Of("disk", AccessLists{}), nullptr); }

TEST(AuthorizationPolicy, AGroupTableWithAnyListReplacesTheHostsListsAsAWhole) {
  AccessLists host;
  host.allowed_gids = std::vector<uint32_t>{1000};
  host.read_only_uids = std::vector<uint32_t>{2000};
  // The group says "nobody may change anything here": the host's allowed_gids must not let gid 1000 in anyway,
  // nor its read_only_uids let uid 2000 read.
  AccessLists group;
  group.allowed_uids = std::vector<uint32_t>{};
  AccessLists merged = MergeAccessLists(host, group);
  EXPECT_EQ(merged, group);
  auto policy = Authorization::Of("system", merged);
  ASSERT_NE(policy, nullptr);
  EXPECT_TRUE(policy->Check(Peer(1000, 1000), "/v1.System/StartService", kMutating));
  EXPECT_TRUE(policy->Check(Peer(5, 5, {1000}), "/v1.System/StartService", kMutating));
  EXPECT_TRUE(policy->Check(Peer(2000, 2000), "/v1.System/GetService", kReadOnly));
  // A group table without any list takes the host's four.
  EXPECT_EQ(MergeAccessLists(host, AccessLists{}), host);
  EXPECT_FALSE(Authorization::Of("disk", MergeAccessLists(host, AccessLists{}))
                   ->Check(Peer(5, 5, {1000}), "/v1.Disk/PartitionDisk", kMutating));
}

TEST(AuthorizationPolicy, AllowedCallersMayCallEverythingReadOnlyCallersOnlyReads) {
  AccessLists lists;
  lists.allowed_uids = std::vector<uint32_t>{1000};
  lists.read_only_gids = std::vector<uint32_t>{2000};
  auto policy = Authorization::Of("disk", lists);
  ASSERT_NE(policy, nullptr);
  EXPECT_FALSE(policy->Check(Peer(1000, 1000), "/v1.Disk/PartitionDisk", kMutating));
  EXPECT_FALSE(policy->Check(Peer(1000, 1000), "/v1.Disk/ListDiskIDs", kReadOnly));
  EXPECT_FALSE(policy->Check(Peer(2000, 5, {2000}), "/v1.Disk/ListDiskIDs", kReadOnly));
  EXPECT_EQ(policy->Check(Peer(2000, 5, {2000}), "/v1.Disk/PartitionDisk", kMutating).value_or(""),
            "uid 2000 (gid 5) may not call /v1.Disk/PartitionDisk of group 'disk': the method changes the node, and "
            "the caller is only in read_only_uids or read_only_gids");
  EXPECT_EQ(policy->Check(Peer(1001, 1001), "/v1.Disk/PartitionDisk", kMutating).value_or(""),
            "uid 1001 (gid 1001) may not call /v1.Disk/PartitionDisk of group 'disk': it is not in allowed_uids or "
            "allowed_gids");
}

TEST(AuthorizationPolicy, RootPassesOnlyWhenListed) {
  AccessLists lists;
  lists.read_only_uids = std::vector<uint32_t>{2000};  // one list turns the check on; the others are empty
  auto policy = Authorization::Of("disk", lists);
  ASSERT_NE(policy, nullptr);
  EXPECT_TRUE(policy->Check(Peer(0, 0), "/v1.Disk/PartitionDisk", kMutating));
  EXPECT_TRUE(policy->Check(Peer(0, 0), "/v1.Disk/ListDiskIDs", kReadOnly));
  lists.allowed_gids = std::vector<uint32_t>{0};
  EXPECT_FALSE(Authorization::Of("disk", lists)->Check(Peer(0, 0), "/v1.Disk/PartitionDisk", kMutating));
}

TEST(AuthorizationPolicy, CallersWithoutCredentialsAreRefused) {
  AccessLists lists;
  lists.allowed_uids = std::vector<uint32_t>{0, 4294967294u};
  lists.allowed_gids = std::vector<uint32_t>{0};
  auto why = Authorization::Of("disk", lists)->Check(PeerCredentials{}, "/v1.Disk/Rescan", kMutating);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("a caller without known credentials may not call"), std::string::npos) << *why;
}

TEST(AuthorizationPolicy, SameAuthorizationComparesTheLists) {
  AccessLists a;
  a.allowed_uids = std::vector<uint32_t>{1};
  AccessLists b = a;
  EXPECT_TRUE(SameAuthorization(Authorization::Of("x", a), Authorization::Of("x", b)));
  b.allowed_uids->push_back(2);
  EXPECT_FALSE(SameAuthorization(Authorization::Of("x", a), Authorization::Of("x", b)));
  EXPECT_FALSE(SameAuthorization(Authorization::Of("x", a), nullptr));
  EXPECT_TRUE(SameAuthorization(nullptr, nullptr));
}

}  // namespace
}  // namespace csi_proxy::host

// The block-device inventory on real loop devices: what an operation changed is seen by the next query
// (attach, detach, resize, partition add and remove), lost events fall back to a rescan, and after any sequence
// of operations the inventory answers as a fresh scan does.
#include "block_inventory_linux.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "loop_device.h"
#include "partition_table_linux.h"

namespace csi_proxy::common {
namespace {

using testing::LoopDevice;

constexpr uint64_t kMiB = 1 << 20;

bool Lists(BlockInventory& inventory, const LoopDevice& loop) {
  auto disks = inventory.ListDisks();
  if (!disks.ok()) return false;
  return std::any_of((*disks)->begin(), (*disks)->end(), [&](const BlockEntry& e) {
    return e.device.name == loop.name() && e.device.diskseq == loop.DiskNumber();
  });
}

// The inventory's view equals a fresh scan's, ignoring devices that changed meanwhile (other tests, other
// processes): compared on the loop devices of this test only.
void ExpectSameAsFreshScan(BlockInventory& inventory, const std::vector<std::string>& disks) {
  auto mine = inventory.Snapshot();
  auto fresh = BlockInventory::FreshScan(inventory.roots());
  ASSERT_TRUE(mine.ok() && fresh.ok());
  auto ours = [&](const BlockEntry& e) {
    return std::find(disks.begin(), disks.end(), e.device.disk_name) != disks.end();
  };
  std::vector<BlockEntry> a, b;
  std::copy_if(mine->begin(), mine->end(), std::back_inserter(a), ours);
  std::copy_if(fresh->begin(), fresh->end(), std::back_inserter(b), ours);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(a[i] == b[i]) << a[i].device.name << " differs from a fresh scan (size " << a[i].device.size_bytes
                              << " vs " << b[i].device.size_bytes << ", diskseq " << a[i].device.diskseq << " vs "
                              << b[i].device.diskseq << ")";
  }
}

class BlockInventoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CSI_PROXY_SKIP_WITHOUT_LOOP_DEVICES();
    inventory_ = std::make_unique<BlockInventory>();
    if (!inventory_->listening()) GTEST_SKIP() << "no NETLINK_KOBJECT_UEVENT socket here";
    ASSERT_TRUE(inventory_->ListDisks().ok());  // the first scan
  }
  std::unique_ptr<BlockInventory> inventory_;
};

TEST_F(BlockInventoryTest, AnAttachedDiskIsListedByTheNextQueryAndADetachedOneIsGone) {
  for (int round = 0; round < 20; ++round) {
    std::string name;
    uint64_t diskseq = 0;  // names are reused by the next attach (maybe another test's); diskseqs never are
    {
      LoopDevice loop(16 * kMiB);
      name = loop.name();
      diskseq = loop.DiskNumber();
      EXPECT_TRUE(Lists(*inventory_, loop)) << "round " << round << ": " << name << " attached but not listed";
      auto by_number = inventory_->DiskByNumber(loop.DiskNumber());
      ASSERT_TRUE(by_number.ok()) << by_number.status().message();
      EXPECT_EQ(by_number->device.size_bytes, 16 * kMiB);
      auto resolved = inventory_->ResolveVolumeId(loop.path());
      ASSERT_TRUE(resolved.ok()) << resolved.status().message();
      EXPECT_EQ(resolved->diskseq, loop.DiskNumber());
    }
    // LOOP_CLR_FD is deferred while anyone else (another process probing devices) has the device open: only
    // a detach the kernel has done before the query started must be seen.
    const bool detached = [&] {
      std::ifstream size("/sys/block/" + name + "/size"), seq("/sys/block/" + name + "/diskseq");
      uint64_t sectors = 0, now = 0;
      size >> sectors;
      seq >> now;
      return sectors == 0 || now != diskseq;
    }();
    auto disks = inventory_->ListDisks();
    ASSERT_TRUE(disks.ok());
    if (!detached) continue;
    EXPECT_FALSE(std::any_of((*disks)->begin(), (*disks)->end(), [&](auto& e) { return e.device.diskseq == diskseq; }))
        << "round " << round << ": " << name << " detached but still listed";
  }
  EXPECT_EQ(inventory_->counters().overflows, 0u);
  EXPECT_GT(inventory_->counters().events_applied, 0u) << "seen through events, not only through rescans";
}

// Queries share one list while no device changes (an answer does not copy every disk); a change makes a new list
// and leaves the one a caller still holds as it was.
TEST_F(BlockInventoryTest, TheDiskListIsSharedUntilADeviceChanges) {
  // Other tests may attach devices meanwhile; two queries in a row without a change are enough.
  bool shared = false;
  for (int i = 0; i < 20 && !shared; ++i) {
    auto a = inventory_->ListDisks();
    auto b = inventory_->ListDisks();
    ASSERT_TRUE(a.ok() && b.ok());
    shared = a->get() == b->get();
  }
  EXPECT_TRUE(shared) << "every query built a list of its own";
  auto before = inventory_->ListDisks();
  ASSERT_TRUE(before.ok());
  const size_t listed_before = (*before)->size();
  LoopDevice loop(16 * kMiB);
  auto after = inventory_->ListDisks();
  ASSERT_TRUE(after.ok());
  EXPECT_NE(after->get(), before->get());
  EXPECT_TRUE(Lists(*inventory_, loop));
  EXPECT_EQ((*before)->size(), listed_before) << "a list a caller holds changed under it";
  EXPECT_FALSE(std::any_of((*before)->begin(), (*before)->end(),
                           [&](const BlockEntry& e) { return e.device.diskseq == loop.DiskNumber(); }));
}

TEST_F(BlockInventoryTest, ACapacityChangeIsSeenByTheNextQuery) {
  LoopDevice loop(16 * kMiB);
  ASSERT_TRUE(Lists(*inventory_, loop));
  for (uint64_t size = 32 * kMiB; size <= 128 * kMiB; size += 16 * kMiB) {
    loop.Grow(size);  // LOOP_SET_CAPACITY: a "change" uevent with RESIZE=1
    auto disk = inventory_->DiskByNumber(loop.DiskNumber());
    ASSERT_TRUE(disk.ok());
    EXPECT_EQ(disk->device.size_bytes, size);
  }
}

TEST_F(BlockInventoryTest, PartitionsAddedAndRemovedWithBlkpgAreSeenByTheNextQuery) {
  LoopDevice loop(64 * kMiB);
  auto disk = inventory_->DiskByNumber(loop.DiskNumber());
  ASSERT_TRUE(disk.ok());
  UniqueFd fd(open(loop.path().c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(fd.valid());
  for (uint32_t n = 1; n <= 4; ++n) {
    ASSERT_TRUE(KernelAddPartition(fd.get(), n, n * 8 * kMiB, 4 * kMiB).ok());
    auto parts = inventory_->PartitionsOf(disk->device);
    ASSERT_TRUE(parts.ok());
    ASSERT_EQ(parts->size(), n);
    EXPECT_EQ(parts->back().partition_number, n);
    EXPECT_EQ(parts->back().start_bytes, n * 8 * kMiB);
    EXPECT_EQ(parts->back().size_bytes, 4 * kMiB);
    EXPECT_EQ(parts->back().diskseq, loop.DiskNumber());
    auto resolved = inventory_->ResolveVolumeId(loop.PartitionPath(static_cast<int>(n)));
    EXPECT_TRUE(resolved.ok()) << resolved.status().message();
  }
  // A BLKPG resize emits no uevent: whoever resizes says so.
  ASSERT_TRUE(KernelResizePartition(fd.get(), 4, 32 * kMiB, 8 * kMiB).ok());
  inventory_->Invalidate(loop.name() + "p4");
  auto parts = inventory_->PartitionsOf(disk->device);
  ASSERT_TRUE(parts.ok());
  EXPECT_EQ(parts->back().size_bytes, 8 * kMiB);
  for (uint32_t n = 4; n >= 1; --n) {
    ASSERT_TRUE(KernelDeletePartition(fd.get(), n).ok());
    auto left = inventory_->PartitionsOf(disk->device);
    ASSERT_TRUE(left.ok());
    EXPECT_EQ(left->size(), n - 1);
  }
}

// The kernel drops events a full socket cannot take and the next recv says ENOBUFS: the inventory rescans.
TEST(BlockInventoryLostEvents, AnOverflowingSocketFallsBackToARescanThatMatchesAFreshScan) {
  CSI_PROXY_SKIP_WITHOUT_LOOP_DEVICES();
  BlockInventory inventory({}, BlockInventoryOptions{.receive_buffer_bytes = 1});  // the kernel's minimum
  if (!inventory.listening()) GTEST_SKIP() << "no NETLINK_KOBJECT_UEVENT socket here";
  ASSERT_TRUE(inventory.ListDisks().ok());
  const auto before = inventory.counters();
  std::vector<std::unique_ptr<LoopDevice>> loops;
  std::vector<std::string> names;
  for (int i = 0; i < 24; ++i) {  // a burst of events nobody reads meanwhile
    loops.push_back(std::make_unique<LoopDevice>(8 * kMiB));
    names.push_back(loops.back()->name());
  }
  for (const auto& loop : loops) EXPECT_TRUE(Lists(inventory, *loop)) << loop->name();
  const auto after = inventory.counters();
  EXPECT_GT(after.overflows, before.overflows) << "the socket never overflowed; the test proved nothing";
  EXPECT_GT(after.rescans, before.rescans);
  ExpectSameAsFreshScan(inventory, names);
}

// The safety net: with an interval of 0 every query rescans.
TEST_F(BlockInventoryTest, TheRescanIntervalBoundsHowOldTheInventoryGets) {
  BlockInventory eager({}, BlockInventoryOptions{.rescan_interval = std::chrono::milliseconds(0)});
  ASSERT_TRUE(eager.ListDisks().ok());
  ASSERT_TRUE(eager.ListDisks().ok());
  EXPECT_EQ(eager.counters().rescans, 2u);
  // Other tests may attach devices meanwhile: only the rescans their event stream asked for (a gap, an overflow)
  // are allowed.
  const auto before = inventory_->counters();
  ASSERT_TRUE(inventory_->ListDisks().ok());
  const auto after = inventory_->counters();
  EXPECT_EQ(after.rescans - before.rescans, (after.gaps - before.gaps) + (after.overflows - before.overflows))
      << "with the default interval a query rescans only when events were lost";
}

// A random sequence of attach, detach, grow, partition add and remove; after each step the inventory answers as
// a fresh scan does.
TEST_F(BlockInventoryTest, AfterARandomSequenceOfOperationsTheAnswersEqualAFreshScan) {
  std::mt19937 random(12);
  std::vector<std::unique_ptr<LoopDevice>> loops;
  std::vector<std::string> names;
  for (int step = 0; step < 60; ++step) {
    int op = static_cast<int>(random() % 5);
    if (loops.empty() || (op == 0 && loops.size() < 6)) {
      loops.push_back(std::make_unique<LoopDevice>(32 * kMiB));
      names.push_back(loops.back()->name());
    } else {
      size_t i = random() % loops.size();
      LoopDevice& loop = *loops[i];
      UniqueFd fd(open(loop.path().c_str(), O_RDONLY | O_CLOEXEC));
      ASSERT_TRUE(fd.valid());
      uint32_t n = 1 + static_cast<uint32_t>(random() % 3);
      if (op == 1) {
        fd.Reset();
        names.erase(std::find(names.begin(), names.end(), loop.name()));  // the name may go to another test
        loops.erase(loops.begin() + static_cast<long>(i));
      } else if (op == 2) {
        loop.Grow(32 * kMiB + (random() % 8) * kMiB);
      } else if (op == 3) {
        (void)KernelAddPartition(fd.get(), n, n * 4 * kMiB, 2 * kMiB);  // EBUSY if it exists: fine
      } else {
        (void)KernelDeletePartition(fd.get(), n);
      }
    }
    ExpectSameAsFreshScan(*inventory_, names);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace csi_proxy::common

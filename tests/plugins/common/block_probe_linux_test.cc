// What libblkid sees on a real loop device.
#include "block_probe_linux.h"

#include <gtest/gtest.h>

#include "loop_device.h"
#include "run_program.h"

namespace csi_proxy::common {
namespace {

using testing::LoopDevice;

TEST(ProbeSignatures, SeesFilesystemsAndPartitionTables) {
  CSI_PROXY_SKIP_WITHOUT_LOOP_DEVICES();
  LoopDevice loop(64 << 20);
  auto empty = ProbeSignatures(loop.path());
  ASSERT_TRUE(empty.ok()) << empty.status().message();
  EXPECT_TRUE(empty->Empty());
  auto mkfs = testing::SystemProgram("mkfs.ext4");
  if (mkfs.empty()) GTEST_SKIP() << "needs mkfs.ext4";
  ASSERT_TRUE(RunProgramChecked({mkfs, "-q", "-F", "-L", "probe-me", loop.path()}).ok());
  auto sig = ProbeSignatures(loop.path());
  ASSERT_TRUE(sig.ok());
  EXPECT_EQ(sig->fs_type, "ext4");
  EXPECT_EQ(sig->usage, "filesystem");
  EXPECT_EQ(sig->label, "probe-me");
  EXPECT_FALSE(sig->uuid.empty());
}

}  // namespace
}  // namespace csi_proxy::common

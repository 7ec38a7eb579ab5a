// FormatVolume's own options (issue 22): which filesystems and mkfs flags a request may ask for, and that a
// refusal names what it refused. Pure checks; volume_service_test runs mkfs with them on loop devices.
#include "format_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace csi_proxy::volume {
namespace {

using ::testing::HasSubstr;

TEST(MkfsOptions, TheOptionsEbsTranslatesFromItsStorageClassAreAllowedForExt4) {
  // EBS's blockSize, inodeSize, bytesPerInode, numberOfInodes, ext4BigAlloc and ext4ClusterSize parameters.
  EXPECT_TRUE(CheckMkfsOptions(
                  "ext4", {"-b", "4096", "-I", "512", "-i", "16384", "-N", "100000", "-O", "bigalloc", "-C", "65536"})
                  .ok());
  EXPECT_TRUE(CheckMkfsOptions("ext4", {"-L", "pvc-1", "-m", "0.5", "-E", "lazy_itable_init=1,stride=16", "-j", "-O",
                                        "^has_journal,metadata_csum", "-T", "largefile"})
                  .ok());
  EXPECT_TRUE(CheckMkfsOptions("ext4", {}).ok());
}

TEST(MkfsOptions, CommonXfsTuningIsAllowed) {
  EXPECT_TRUE(CheckMkfsOptions("xfs", {"-b", "size=4096", "-m", "crc=1,reflink=1", "-i", "size=512", "-d",
                                       "agcount=4,su=64k,sw=2", "-n", "ftype=1", "-L", "data", "-s", "size=4096"})
                  .ok());
}

TEST(MkfsOptions, FlagsThatReadOrWriteAnythingButTheVolumeAreRefusedByName) {
  auto s = CheckMkfsOptions("ext4", {"-d", "/etc"});  // mke2fs -d copies a host directory into the filesystem
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("mkfs option \"-d\" is not allowed for ext4 (allowed: -b, -C, -E"));
  s = CheckMkfsOptions("xfs", {"-p", "/etc/passwd"});  // a protofile from the host
  EXPECT_THAT(s.message(), HasSubstr("mkfs option \"-p\" is not allowed for xfs"));
  s = CheckMkfsOptions("xfs", {"-d", "name=/etc/shadow"});
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("sub-option \"name\" is not allowed"));
  s = CheckMkfsOptions("xfs", {"-l", "logdev=/dev/sda"});
  EXPECT_THAT(s.message(), HasSubstr("sub-option \"logdev\" is not allowed"));
  s = CheckMkfsOptions("ext4", {"-J", "device=/dev/sda"});
  EXPECT_THAT(s.message(), HasSubstr("sub-option \"device\" is not allowed"));
  s = CheckMkfsOptions("ext4", {"-E", "offset=4096"});
  EXPECT_THAT(s.message(), HasSubstr("sub-option \"offset\" is not allowed"));
}

TEST(MkfsOptions, FlagsThatWouldOverwriteOrChangeHowMkfsRunsAreRefused) {
  for (const char* flag : {"-f", "-F", "-q", "-n", "-S", "-c", "-z", "-K", "-N"}) {
    SCOPED_TRACE(flag);
    EXPECT_EQ(CheckMkfsOptions("xfs", {flag}).code(), Code::kInvalidArgument);
  }
  for (const char* flag : {"-F", "-S", "-n", "-z", "-D", "-e", "-U", "-t", "-r"}) {
    SCOPED_TRACE(flag);
    EXPECT_EQ(CheckMkfsOptions("ext4", {flag, "x"}).code(), Code::kInvalidArgument);
  }
}

TEST(MkfsOptions, ValuesAreCheckedAndARefusalSaysWhatIsAllowed) {
  auto s = CheckMkfsOptions("ext4", {"-b", "4097"});
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("the value \"4097\" of mkfs option -b is not allowed for ext4 (allowed: a "
                                     "block size, 1024 to 65536)"));
  EXPECT_THAT(CheckMkfsOptions("ext4", {"-L", "a label, with a comma"}).message(), HasSubstr("-L"));
  EXPECT_THAT(CheckMkfsOptions("ext4", {"-L", "-F"}).message(), HasSubstr("\"-F\" of mkfs option -L"));
  EXPECT_THAT(CheckMkfsOptions("ext4", {"-b"}).message(), HasSubstr("mkfs option -b needs a value"));
  EXPECT_THAT(CheckMkfsOptions("ext4", {"-b 4096"}).message(), HasSubstr("each flag and its value are separate items"));
  EXPECT_THAT(CheckMkfsOptions("xfs", {"-m", "crc=2"}).message(), HasSubstr("sub-option \"crc=2\" has a value"));
  EXPECT_EQ(CheckMkfsOptions("ext4", std::vector<std::string>(65, "-j")).code(), Code::kInvalidArgument);
}

TEST(MkfsOptions, NoOptionsAreAcceptedForAFilesystemWithoutAnAllowList) {
  EXPECT_EQ(CheckMkfsOptions("ntfs", {"-Q"}).code(), Code::kInvalidArgument);
  EXPECT_TRUE(CheckMkfsOptions("ntfs", {}).ok());
}

}  // namespace
}  // namespace csi_proxy::volume

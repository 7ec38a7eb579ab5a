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

// On Windows the options are MSFT_Volume.Format's in-parameters ("Name=value"), from an allow-list per file system.
TEST(FormatParameters, NtfsTakesItsDocumentedTuningByName) {
  auto parameters = ParseFormatParameters("ntfs", {"AllocationUnitSize=65536", "FileSystemLabel=pvc-1",
                                                   "Compress=false", "UseLargeFRS=true", "ShortFileNameSupport=false"});
  ASSERT_TRUE(parameters.ok()) << parameters.status().message();
  ASSERT_EQ(parameters->size(), 5u);
  EXPECT_EQ((*parameters)[0].name, "AllocationUnitSize");
  EXPECT_EQ(std::get<uint64_t>((*parameters)[0].value), 65536u);
  EXPECT_EQ(std::get<std::string>((*parameters)[1].value), "pvc-1");
  EXPECT_EQ(std::get<bool>((*parameters)[2].value), false);
  EXPECT_EQ(std::get<bool>((*parameters)[3].value), true);
  EXPECT_TRUE(CheckMkfsOptions("ntfs", {"AllocationUnitSize=2097152"}).ok());
  EXPECT_TRUE(CheckMkfsOptions("refs", {"AllocationUnitSize=4096", "SetIntegrityStreams=true"}).ok());
}

TEST(FormatParameters, WhatChangesHowOrWhatIsFormattedIsRefusedByName) {
  for (const char* item : {"Force=true", "Full=true", "FileSystem=FAT32", "-L", "AllocationUnitSize"}) {
    auto s = CheckMkfsOptions("ntfs", {item});
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << item;
    EXPECT_THAT(s.message(), HasSubstr("is not allowed for ntfs (allowed: Name=value with Name one of "
                                       "AllocationUnitSize, FileSystemLabel, Compress"))
        << s.message();
  }
  EXPECT_THAT(CheckMkfsOptions("refs", {"Compress=true"}).message(), HasSubstr("\"Compress=true\" is not allowed"));
  EXPECT_THAT(CheckMkfsOptions("ntfs", {"SetIntegrityStreams=true"}).message(), HasSubstr("not allowed for ntfs"));
}

TEST(FormatParameters, ValuesAreCheckedAndNamesGivenOnce) {
  auto s = CheckMkfsOptions("ntfs", {"AllocationUnitSize=3000"});
  EXPECT_THAT(s.message(), HasSubstr("the value \"3000\" of format option AllocationUnitSize is not allowed for "
                                     "ntfs (allowed: a power of two, 512 to 2097152)"));
  EXPECT_FALSE(CheckMkfsOptions("ntfs", {"AllocationUnitSize=4194304"}).ok());
  EXPECT_FALSE(CheckMkfsOptions("refs", {"AllocationUnitSize=8192"}).ok());
  EXPECT_FALSE(CheckMkfsOptions("ntfs", {"Compress=yes"}).ok());
  EXPECT_FALSE(CheckMkfsOptions("ntfs", {"FileSystemLabel=a label with blanks"}).ok());
  EXPECT_FALSE(CheckMkfsOptions("ntfs", {"FileSystemLabel=" + std::string(33, 'x')}).ok());
  EXPECT_THAT(CheckMkfsOptions("ntfs", {"Compress=true", "Compress=false"}).message(), HasSubstr("given twice"));
  // Windows' parameters are not mkfs flags, and mkfs flags are not Windows' parameters.
  EXPECT_FALSE(ParseFormatParameters("ext4", {"Compress=true"}).ok());
  EXPECT_FALSE(CheckMkfsOptions("ext4", {"Compress=true"}).ok());
}

}  // namespace
}  // namespace csi_proxy::volume

// The group configuration a library reads (csi_proxy/config.hpp): typed getters, ranges and choices, and errors that
// quote the key, so that the host can add the key's file and line to the refusal.
#include "csi_proxy/config.hpp"

#include <gtest/gtest.h>

#include <string>

namespace csi_proxy::sdk {
namespace {

PluginConfig Config(const std::string& group_keys) {
  auto config = PluginConfig::Parse(
      "[host]\ngroup_name = \"widget\"\nkubelet_path = \"/k\"\nworking_dirs = [\"/w\"]\n"
      "state_dir = \"/s\"\n[group]\n" +
      group_keys);
  EXPECT_TRUE(config.ok()) << config.status().message();
  return *config;
}

TEST(PluginConfig, NodeSettingsComeFromTheHostTable) {
  PluginConfig config = Config("");
  EXPECT_EQ(config.group_name(), "widget");
  EXPECT_EQ(config.kubelet_path(), "/k");
  EXPECT_EQ(config.working_dirs(), std::vector<std::string>{"/w"});
  EXPECT_EQ(config.state_dir(), "/s");
}

TEST(PluginConfig, AnAbsentKeyGivesTheFallbackAndAPresentOneItsValue) {
  PluginConfig config = Config("speed = 7\nname = \"x\"\nfast = true\ndirs = [\"/a\", \"/b\"]\n");
  EXPECT_EQ(*config.GetInt("speed", 3, IntRange{1, 10}), 7);
  EXPECT_EQ(*config.GetInt("absent", 3, IntRange{1, 10}), 3);
  EXPECT_EQ(*config.GetString("name", "y"), "x");
  EXPECT_TRUE(*config.GetBool("fast", false));
  EXPECT_EQ(*config.GetStringArray("dirs"), (std::vector<std::string>{"/a", "/b"}));
  EXPECT_EQ(*config.GetStringArray("absent", {"/c"}), std::vector<std::string>{"/c"});
  EXPECT_EQ(*config.GetChoice("absent", "ext4", {"ext4", "xfs"}), "ext4");
  EXPECT_TRUE(config.Has("speed"));
  EXPECT_FALSE(config.Has("absent"));
}

TEST(PluginConfig, AnIntegerOutsideItsRangeIsRefusedQuotingTheKey) {
  auto status = Config("port = 0\n").GetInt("port", 445, IntRange{1, 65535}).status();
  EXPECT_EQ(status.code(), Code::kInvalidArgument);
  EXPECT_EQ(status.message(), "group key 'port' must be an integer from 1 to 65535, not 0");
}

TEST(PluginConfig, AValueOutsideItsChoicesIsRefusedNamingTheChoices) {
  auto status = Config("default_fs_type = \"btrfs\"\n").GetChoice("default_fs_type", "ext4", {"ext4", "xfs"}).status();
  EXPECT_EQ(status.code(), Code::kInvalidArgument);
  EXPECT_EQ(status.message(), "group key 'default_fs_type' must be one of ext4, xfs, not \"btrfs\"");
}

TEST(PluginConfig, APathMustBeAbsoluteAndMayBeEmptyOnlyWhenAllowed) {
  PluginConfig config = Config("helper = \"sbin/mount.cifs\"\nempty = \"\"\n");
  EXPECT_EQ(config.GetAbsolutePath("helper", "").status().message(),
            "group key 'helper' must be an absolute path, not \"sbin/mount.cifs\"");
  EXPECT_EQ(*config.GetAbsolutePath("empty", "/x", /*may_be_empty=*/true), "");
  EXPECT_EQ(config.GetAbsolutePath("empty", "/x").status().message(),
            "group key 'empty' must be an absolute path, not \"\"");
  EXPECT_EQ(config.GetAbsolutePath("helper", "", true).status().message(),
            "group key 'helper' must be an absolute path or empty, not \"sbin/mount.cifs\"");
}

TEST(PluginConfig, AKeyOfTheWrongTypeIsRefusedQuotingTheKey) {
  PluginConfig config = Config("speed = \"fast\"\nname = 3\ndirs = [1]\nflag = 1\n");
  EXPECT_EQ(config.GetInt("speed", 1, IntRange{1, 10}).status().message(), "group key 'speed' must be an integer");
  EXPECT_EQ(config.GetString("name", "").status().message(), "group key 'name' must be a string");
  EXPECT_EQ(config.GetChoice("name", "a", {"a"}).status().message(), "group key 'name' must be a string");
  EXPECT_EQ(config.GetStringArray("dirs").status().message(), "group key 'dirs' must be an array of strings");
  EXPECT_EQ(config.GetBool("flag", false).status().message(), "group key 'flag' must be a boolean");
}

TEST(PluginConfig, AGroupsOwnRuleQuotesTheKeyAndTheValueSafely) {
  EXPECT_EQ(PluginConfig::KeyError("partition_type", "must be a GPT type GUID").message(),
            "group key 'partition_type' must be a GPT type GUID");
  EXPECT_EQ(PluginConfig::QuoteValue("a\nb"), "\"a?b\"");
  EXPECT_EQ(PluginConfig::QuoteValue(std::string(150, 'x')), "\"" + std::string(100, 'x') + "...\"");
}

TEST(PluginConfig, AnUnknownKeyIsRefusedWithTheKnownOnes) {
  auto status = Config("sped = 1\n").RequireKnownKeys({"speed", "name"});
  EXPECT_EQ(status.code(), Code::kInvalidArgument);
  EXPECT_EQ(status.message(), "unknown key 'sped' in [groups.widget]; known keys: speed, name");
  EXPECT_TRUE(Config("speed = 1\n").RequireKnownKeys({"speed"}).ok());
}

}  // namespace
}  // namespace csi_proxy::sdk

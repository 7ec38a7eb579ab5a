// The lexical allowed-roots rule (plugins/common/path_policy.h): which request paths are under the kubelet
// path or a working dir, component by component.
#include "path_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace csi_proxy::common {
namespace {

using ::testing::HasSubstr;

PathPolicy Policy() {
  auto p = PathPolicy::Create("/var/lib/kubelet", {"/var/lib/driver/scratch", "/var/lib/kubelet/plugins/x"});
  EXPECT_TRUE(p.ok()) << p.status().message();
  return *p;
}

TEST(PathPolicy, PathBelowKubeletPathIsConfinedToIt) {
  auto c = Policy().Confine("/var/lib/kubelet/pods/abc/volumes");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->path, "/var/lib/kubelet/pods/abc/volumes");
  EXPECT_EQ(c->root, "/var/lib/kubelet");
  EXPECT_EQ(c->relative, "pods/abc/volumes");
}

TEST(PathPolicy, StringPrefixSiblingIsNotUnderTheRoot) {
  auto c = Policy().Confine("/var/lib/kubelet-evil/x");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kPermissionDenied);
  EXPECT_THAT(c.status().message(), HasSubstr("\"/var/lib/kubelet-evil/x\""));
  EXPECT_THAT(c.status().message(),
              HasSubstr("[/var/lib/kubelet, /var/lib/driver/scratch, /var/lib/kubelet/plugins/x]"));
}

TEST(PathPolicy, ParentOfARootIsNotAllowed) {
  EXPECT_EQ(Policy().Confine("/var/lib").status().code(), Code::kPermissionDenied);
  EXPECT_EQ(Policy().Confine("/").status().code(), Code::kPermissionDenied);
}

TEST(PathPolicy, TheRootItselfIsConfinedWithAnEmptyRelativePart) {
  auto c = Policy().Confine("/var/lib/driver/scratch/");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->is_root());
  EXPECT_EQ(c->root, "/var/lib/driver/scratch");
  EXPECT_EQ(c->path, "/var/lib/driver/scratch");
}

TEST(PathPolicy, NestedRootsPickTheLongest) {
  auto c = Policy().Confine("/var/lib/kubelet/plugins/x/stage");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->root, "/var/lib/kubelet/plugins/x");
  EXPECT_EQ(c->relative, "stage");
}

TEST(PathPolicy, DuplicateSlashesDotsAndTrailingSlashAreNormalized) {
  auto c = Policy().Confine("/var//lib/./kubelet/pods//p/./");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->path, "/var/lib/kubelet/pods/p");
  EXPECT_EQ(c->relative, "pods/p");
}

TEST(PathPolicy, DotDotComponentIsInvalidEvenWhenItWouldStayInside) {
  for (const char* p : {"/var/lib/kubelet/../kubelet/x", "/var/lib/kubelet/pods/..", "/var/lib/kubelet/a/../b"}) {
    auto c = Policy().Confine(p);
    EXPECT_EQ(c.status().code(), Code::kInvalidArgument) << p;
    EXPECT_THAT(c.status().message(), HasSubstr("'..'")) << p;
  }
}

TEST(PathPolicy, DotsInsideANameAreOrdinaryCharacters) {
  EXPECT_TRUE(Policy().Confine("/var/lib/kubelet/a..b/...").ok());
}

TEST(PathPolicy, EmptyRelativeAndNulPathsAreInvalid) {
  EXPECT_EQ(Policy().Confine("").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(Policy().Confine("var/lib/kubelet/x").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(Policy().Confine("./x").status().code(), Code::kInvalidArgument);
  std::string with_nul = "/var/lib/kubelet/a";
  with_nul.push_back('\0');
  with_nul += "b";
  auto c = Policy().Confine(with_nul);
  EXPECT_EQ(c.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("NUL"));
  EXPECT_THAT(c.status().message(), HasSubstr("\\x00"));
}

TEST(PathPolicy, FieldNameAppearsInMessages) {
  auto c = Policy().Confine("relative", "source_path");
  EXPECT_THAT(c.status().message(), HasSubstr("source_path"));
}

TEST(PathPolicy, OverlongPathsAndNamesAreInvalid) {
  EXPECT_EQ(Policy().Confine("/var/lib/kubelet/" + std::string(256, 'a')).status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(Policy().Confine("/var/lib/kubelet/" + std::string(255, 'a')).ok());
  std::string deep = "/var/lib/kubelet";
  while (deep.size() < 5000) deep += "/abcdefgh";
  EXPECT_EQ(Policy().Confine(deep).status().code(), Code::kInvalidArgument);
}

TEST(PathPolicy, ControlCharactersAreEscapedInMessages) {
  auto c = Policy().Confine("/etc/x\nINFO forged log line");
  EXPECT_THAT(c.status().message(), HasSubstr("\\x0a"));
  EXPECT_EQ(c.status().message().find('\n'), std::string::npos);
}

TEST(PathPolicy, CreateRefusesSlashRelativeAndDotDotRoots) {
  EXPECT_EQ(PathPolicy::Create("/", {}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(PathPolicy::Create("/var/lib/kubelet", {"//"}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(PathPolicy::Create("var/lib/kubelet", {}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(PathPolicy::Create("/var/lib/kubelet", {"/a/../b"}).status().code(), Code::kInvalidArgument);
}

TEST(PathPolicy, CreateNormalizesSkipsEmptyAndCollapsesDuplicates) {
  auto p = PathPolicy::Create("/var/lib/kubelet/", {"", "/var//lib/kubelet", "/srv/./work"});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->roots(), (std::vector<std::string>{"/var/lib/kubelet", "/srv/work"}));
}

TEST(PathPolicy, WithoutRootsEveryPathIsRefused) {
  auto p = PathPolicy::Create("", {});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->Confine("/var/lib/kubelet/x").status().code(), Code::kPermissionDenied);
}

TEST(PathPolicy, SplitAtRootKeepsDotDotForTheResolverToJudge) {
  auto s = Policy().SplitAtRoot("/var/lib/kubelet/a/../b");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->root, "/var/lib/kubelet");
  EXPECT_EQ(s->rest, (std::vector<std::string>{"a", "..", "b"}));
  EXPECT_FALSE(Policy().SplitAtRoot("/var/lib/kubelet-evil").has_value());
  EXPECT_FALSE(Policy().SplitAtRoot("/var/lib/x/../kubelet").has_value());
  EXPECT_FALSE(Policy().SplitAtRoot("relative/path").has_value());
}

TEST(PathPolicy, LinkTargetDirsAreNotAllowedRootsForRequests) {
  auto p = PathPolicy::Create("/var/lib/kubelet", {}, {"/var/lib/csi-proxy/smb"});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->Confine("/var/lib/csi-proxy/smb/srv/share").status().code(), Code::kPermissionDenied);
  EXPECT_EQ(p->roots(), (std::vector<std::string>{"/var/lib/kubelet"}));
  EXPECT_EQ(p->link_target_dirs(), (std::vector<std::string>{"/var/lib/csi-proxy/smb"}));
  EXPECT_EQ(p->RootsForMessage(), "[/var/lib/kubelet]");
}

TEST(PathPolicy, LinkTextMayStartWithALinkTargetDirOnlyWhenAskedFor) {
  auto p = PathPolicy::Create("/var/lib/kubelet", {}, {"/var/lib/csi-proxy/smb"});
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->SplitAtRoot("/var/lib/csi-proxy/smb/srv/share").has_value());
  auto s = p->SplitAtRoot("/var/lib/csi-proxy/smb/srv/share", /*include_link_targets=*/true);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->root, "/var/lib/csi-proxy/smb");
  EXPECT_EQ(s->rest, (std::vector<std::string>{"srv", "share"}));
}

TEST(PathPolicy, LinkTargetDirThatIsAlsoARootStaysARoot) {
  auto p = PathPolicy::Create("/var/lib/kubelet", {}, {"/var/lib/kubelet/"});
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->link_target_dirs().empty());
  EXPECT_TRUE(p->Confine("/var/lib/kubelet/x").ok());
}

TEST(PathPolicy, LinkTargetDirsFollowTheRulesOfRoots) {
  EXPECT_EQ(PathPolicy::Create("/var/lib/kubelet", {}, {"/"}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(PathPolicy::Create("/var/lib/kubelet", {}, {"smb"}).status().code(), Code::kInvalidArgument);
  EXPECT_THAT(PathPolicy::Create("/var/lib/kubelet", {}, {"/a/../b"}).status().message(), HasSubstr("link target"));
}

// ---- The Windows syntax (PathSyntax::kWindows), the rule of the Windows build, checked here on Linux too.

PathPolicy WindowsPolicy() {
  auto p = PathPolicy::Create("C:\\var\\lib\\kubelet", {"D:/csi/work"}, {"C:\\ProgramData\\csi-proxy\\smb"},
                              PathSyntax::kWindows);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return *p;
}

TEST(WindowsPathPolicy, PathBelowKubeletPathIsConfinedWithBackslashes) {
  auto c = WindowsPolicy().Confine("C:\\var\\lib\\kubelet\\pods\\abc/volumes\\\\x\\.\\");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->path, "C:\\var\\lib\\kubelet\\pods\\abc\\volumes\\x");
  EXPECT_EQ(c->root, "C:\\var\\lib\\kubelet");
  EXPECT_EQ(c->relative, "pods\\abc\\volumes\\x");
  EXPECT_EQ(WindowsPolicy().Split(c->relative), (std::vector<std::string>{"pods", "abc", "volumes", "x"}));
  EXPECT_EQ(WindowsPolicy().roots(), (std::vector<std::string>{"C:\\var\\lib\\kubelet", "D:\\csi\\work"}));
}

TEST(WindowsPathPolicy, RootsMatchCaseInsensitivelyAndKeepTheirConfiguredSpelling) {
  auto c = WindowsPolicy().Confine("c:\\VAR\\Lib\\KUBELET\\Pods");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->root, "C:\\var\\lib\\kubelet");
  EXPECT_EQ(c->relative, "Pods");
  EXPECT_EQ(c->path, "C:\\VAR\\Lib\\KUBELET\\Pods");
  EXPECT_TRUE(WindowsPolicy().Confine("d:\\CSI\\Work").ok());
}

TEST(WindowsPathPolicy, EverySpellingOfAPathHasOneLockKey) {
  auto a = WindowsPolicy().Confine("C:\\var\\lib\\kubelet\\Pods\\X");
  auto b = WindowsPolicy().Confine("c:/VAR/lib/kubelet/pods/x/");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(WindowsPolicy().SameObjectKey(*a), WindowsPolicy().SameObjectKey(*b));
  auto upper = Policy().Confine("/var/lib/kubelet/Pods");
  auto lower = Policy().Confine("/var/lib/kubelet/pods");
  EXPECT_NE(Policy().SameObjectKey(*upper), Policy().SameObjectKey(*lower));  // two objects on Linux
}

TEST(WindowsPathPolicy, PrefixTricksAreNotUnderTheRoot) {
  for (const char* p : {"C:\\var\\lib\\kubelet-evil\\x", "C:\\var\\lib\\kubeletX", "C:\\var\\lib", "C:\\",
                        "E:\\var\\lib\\kubelet\\x", "C:\\ProgramData\\csi-proxy\\smb\\share"}) {
    auto c = WindowsPolicy().Confine(p);
    EXPECT_EQ(c.status().code(), Code::kPermissionDenied) << p;
  }
}

TEST(WindowsPathPolicy, OnlyDriveLetterPathsAreAbsolute) {
  for (const char* p :
       {"\\\\server\\share\\var\\lib\\kubelet", "\\\\?\\C:\\var\\lib\\kubelet\\x", "\\\\.\\C:\\var\\lib\\kubelet\\x",
        "\\var\\lib\\kubelet\\x", "C:var\\lib\\kubelet", "/var/lib/kubelet/x", "var\\lib", "1:\\x", "C:"}) {
    auto c = WindowsPolicy().Confine(p);
    EXPECT_EQ(c.status().code(), Code::kInvalidArgument) << p;
    EXPECT_THAT(c.status().message(), HasSubstr("drive letter")) << p;
  }
}

TEST(WindowsPathPolicy, DotDotIsInvalidWithEitherSeparator) {
  for (const char* p :
       {"C:\\var\\lib\\kubelet\\..\\kubelet\\x", "C:/var/lib/kubelet/a/../b", "C:\\var\\lib\\kubelet\\a/.."}) {
    EXPECT_EQ(WindowsPolicy().Confine(p).status().code(), Code::kInvalidArgument) << p;
  }
}

TEST(WindowsPathPolicy, ComponentsWin32WouldReadDifferentlyAreInvalid) {
  for (const char* name : {"x:stream",   "dir::$INDEX_ALLOCATION",
                           "a*b",        "a?b",
                           "a<b",        "a>b",
                           "a|b",        "a\"b",
                           "trailing.",  "trailing ",
                           "...",        "NUL",
                           "nul.txt",    "Con",
                           "aux.tar.gz", "COM1",
                           "lpt9.log",   "com0",
                           "conin$",     "COM\xc2\xb9",
                           "tab\there"}) {
    auto c = WindowsPolicy().Confine(std::string("C:\\var\\lib\\kubelet\\") + name + "\\x");
    EXPECT_EQ(c.status().code(), Code::kInvalidArgument) << name;
  }
  for (const char* name : {"a..b", ".hidden", "COM10", "console", "nulx", "lpt", "com"}) {
    EXPECT_TRUE(WindowsPolicy().Confine(std::string("C:\\var\\lib\\kubelet\\") + name).ok()) << name;
  }
}

TEST(WindowsPathPolicy, LinkTextSplitsAtARootCaseInsensitively) {
  auto s = WindowsPolicy().SplitAtRoot("c:\\Var\\LIB\\kubelet\\a\\..\\b");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->root, "C:\\var\\lib\\kubelet");
  EXPECT_EQ(s->rest, (std::vector<std::string>{"a", "..", "b"}));
  EXPECT_FALSE(WindowsPolicy().SplitAtRoot("C:\\var\\lib\\kubelet-evil").has_value());
  EXPECT_FALSE(WindowsPolicy().SplitAtRoot("\\\\server\\share").has_value());
  EXPECT_FALSE(WindowsPolicy().SplitAtRoot("C:\\ProgramData\\csi-proxy\\smb\\s").has_value());
  EXPECT_TRUE(WindowsPolicy().SplitAtRoot("C:\\ProgramData\\csi-proxy\\SMB\\s", true).has_value());
}

TEST(WindowsPathPolicy, CreateRefusesDriveRootsRelativeAndDotDotRoots) {
  for (const char* root :
       {"C:\\", "C:/", "C:\\.", "var\\lib\\kubelet", "\\\\server\\share", "C:\\a\\..\\b", "/var/lib"}) {
    EXPECT_EQ(PathPolicy::Create(root, {}, {}, PathSyntax::kWindows).status().code(), Code::kInvalidArgument) << root;
  }
  auto p = PathPolicy::Create("c:\\var\\lib\\kubelet\\", {"C:/VAR/lib/Kubelet"}, {}, PathSyntax::kWindows);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->roots(), (std::vector<std::string>{"C:\\var\\lib\\kubelet"}));
}

}  // namespace
}  // namespace csi_proxy::common

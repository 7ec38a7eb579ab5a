// The SMB group's Windows backend (plugins/smb/src/smb_backend_wmi.cc) behind its real service layer, against
// recorded answers of the SMB client's WMI (tests/windows/recorded_smb_client.h) and links recorded in memory;
// users are counted in real state records in a temporary directory. Written from Microsoft's documentation of
// MSFT_SmbGlobalMapping and upstream's code (pkg/os/smb, pkg/wmi/smb.go); the group has not yet run on a Windows
// node. What only Windows can do (directory symlinks, the COM client) is tested under Wine
// (tests/windows/smb_iscsi_windows_test.cc) as far as Wine goes.
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "recorded_smb_client.h"
#include "smb_backend_wmi.h"
#include "smb_global_mapping.h"
#include "smb_service.h"
#include "temp_dir.h"

namespace csi_proxy::smb {
namespace {

namespace wmi = common::wmi;
using testing::RecordedSmbClient;
using testing::RecordedWmi;

constexpr const char* kKubelet = "/var/lib/kubelet";
constexpr const char* kStage1 = "/var/lib/kubelet/plugins/smb/pv-1/globalmount";
constexpr const char* kStage2 = "/var/lib/kubelet/plugins/smb/pv-2/globalmount";
// Full of the characters a credential string, a query or a command line would trip over.
constexpr const char* kPassword = "s3cr3t:p@ss,w\\rd'\" $(x);`y`%0A";

// Links as the Windows file system would hold them: a path, and the target of the symlink there (or "" for
// something else in the way).
class RecordedLinks final : public SmbLinks {
 public:
  Status Check(const common::ConfinedPath& local, const std::string& target) override {
    std::lock_guard lock(mu_);
    if (missing_parents.count(Parent(local.path))) return NotFound("the parent directory of local_path does not exist");
    auto at = entries.find(local.path);
    if (at == entries.end() || at->second == target) return Status::Ok();
    return AlreadyExists("local_path " + local.path + " already exists");
  }
  Status Make(const common::ConfinedPath& local, const std::string& target) override {
    CSI_PROXY_RETURN_IF_ERROR(Check(local, target));
    std::lock_guard lock(mu_);
    entries[local.path] = target;
    return Status::Ok();
  }
  bool IsLive(const std::string& path, const std::string& target) {
    std::lock_guard lock(mu_);
    auto at = entries.find(path);
    return at != entries.end() && at->second == target;
  }
  // What a driver's Rmdir (or kubelet) does to a link.
  void Remove(const std::string& path) {
    std::lock_guard lock(mu_);
    entries.erase(path);
  }

  std::map<std::string, std::string> entries;
  std::set<std::string> missing_parents;

 private:
  static std::string Parent(const std::string& path) { return path.substr(0, path.rfind('/')); }
  std::mutex mu_;
};

class WmiSmbBackendTest : public ::testing::Test {
 protected:
  void SetUp() override { StartService(); }

  // The group as a start makes it, over the same machine (WMI, links, state directory): a restart when called again.
  void StartService(bool require_privacy = true) {
    auto policy = common::PathPolicy::Create(kKubelet, {});
    ASSERT_TRUE(policy.ok());
    SmbBackendOptions options;
    options.require_privacy = require_privacy;
    options.state_dir = state_.path();
    options.log = Logger();
    WmiSmbSystem system{wmi_.Connector(), std::make_unique<LinksView>(links_), Users()};
    service_ = std::make_unique<SmbService>(MakeWmiSmbBackend(options, *policy, std::move(system)), *policy, Logger());
  }

  // How the users' count sees the recorded links and unmaps: as on Windows, through the SMB client's WMI.
  common::SmbMappingUsers::System Users() {
    return {[this](const std::string& path, const std::string& target) { return links_.IsLive(path, target); },
            [this](const common::SmbMapping& mapping) {
              auto session = wmi_.Connector()(wmi::kSmbNamespace);
              if (!session.ok()) return session.status();
              return common::RemoveSmbGlobalMapping(**session, mapping.mount_point);
            }};
  }

  // The filesystem group's Rmdir of a link, as on Windows.
  void RmdirLink(const std::string& path) {
    links_.Remove(path);
    auto policy = common::PathPolicy::Create(kKubelet, {});
    common::SmbMappingUsers(state_.path(), *policy, Logger(), Users()).ReleaseLinksGoneUnder(path).value();
  }

  sdk::LogSink Logger() {
    return [this](sdk::LogLevel, std::string_view line) {
      std::lock_guard lock(log_mu_);
      log_ += std::string(line) + "\n";
    };
  }

  std::vector<RecordedWmi::Call> Creates() const { return wmi_.CallsOf("Create"); }
  std::vector<RecordedWmi::Call> Removes() const { return wmi_.CallsOf("Remove"); }

  // A view of the links the test keeps (the backend owns its SmbLinks).
  class LinksView final : public SmbLinks {
   public:
    explicit LinksView(RecordedLinks& links) : links_(links) {}
    Status Check(const common::ConfinedPath& l, const std::string& t) override { return links_.Check(l, t); }
    Status Make(const common::ConfinedPath& l, const std::string& t) override { return links_.Make(l, t); }

   private:
    RecordedLinks& links_;
  };

  testing::TempDir state_{"csi-proxy-smb-wmi"};
  RecordedWmi wmi_;
  RecordedSmbClient smb_{wmi_};
  RecordedLinks links_;
  std::mutex log_mu_;
  std::string log_;
  std::unique_ptr<SmbService> service_;
};

std::string Text(const wmi::Value& v) { return std::holds_alternative<std::string>(v) ? std::get<std::string>(v) : ""; }

TEST_F(WmiSmbBackendTest, MapsTheShareWithTheCredentialAsAMethodArgumentAndLinksLocalPathToItsUncPath) {
  ASSERT_TRUE(
      service_->NewSmbGlobalMapping("\\\\Files.Example.com\\Share\\pvc-1", kStage1, "CONTOSO\\svc-csi", kPassword)
          .ok());
  ASSERT_EQ(Creates().size(), 1u);
  const auto create = Creates().front();
  EXPECT_EQ(create.class_name, "MSFT_SmbGlobalMapping");
  EXPECT_EQ(create.path, "MSFT_SmbGlobalMapping");  // the static Create, as upstream calls it
  // One mapping per share, lowercase as upstream makes it; the user's '\' escaped as PowerShell passes it.
  EXPECT_EQ(Text(RecordedWmi::Argument(create, "RemotePath")), "\\\\files.example.com\\share");
  EXPECT_EQ(Text(RecordedWmi::Argument(create, "Credential")), std::string("CONTOSO\\\\svc-csi:") + kPassword);
  EXPECT_EQ(std::get<bool>(RecordedWmi::Argument(create, "RequirePrivacy")), true);
  EXPECT_TRUE(smb_.IsMapped("\\\\files.example.com\\share"));
  // The link is a directory symlink to the share's sub-path, with the final '\' upstream adds.
  EXPECT_EQ(links_.entries[kStage1], "\\\\files.example.com\\share\\pvc-1\\");
}

TEST_F(WmiSmbBackendTest, RequirePrivacyFollowsTheConfigurationAndNoUserMeansNoCredential) {
  StartService(/*require_privacy=*/false);
  ASSERT_TRUE(service_->NewSmbGlobalMapping("//srv/share", "", "", "").ok());
  ASSERT_EQ(Creates().size(), 1u);
  EXPECT_EQ(std::get<bool>(RecordedWmi::Argument(Creates().front(), "RequirePrivacy")), false);
  // Upstream sends no Credential without a username: the machine's own identity maps the share.
  EXPECT_TRUE(std::holds_alternative<std::monostate>(RecordedWmi::Argument(Creates().front(), "Credential")));
}

TEST_F(WmiSmbBackendTest, AHealthyMappingIsReusedAndAMappingThatLostItsServerIsMadeAgain) {
  smb_.Map("\\\\srv\\healthy");
  smb_.Map("\\\\srv\\gone", /*status=Disconnected*/ 2);
  ASSERT_TRUE(service_->NewSmbGlobalMapping("\\\\srv\\healthy\\a", kStage1, "u", "p").ok());
  EXPECT_TRUE(Creates().empty());
  EXPECT_EQ(links_.entries[kStage1], "\\\\srv\\healthy\\a\\");

  ASSERT_TRUE(service_->NewSmbGlobalMapping("\\\\srv\\gone\\b", kStage2, "u", "p").ok());
  ASSERT_EQ(Removes().size(), 1u);
  EXPECT_EQ(std::get<bool>(RecordedWmi::Argument(Removes().front(), "Force")), true);
  ASSERT_EQ(Creates().size(), 1u);
  EXPECT_NE(log_.find("does not answer (its status is Disconnected); remapping it"), std::string::npos) << log_;
}

TEST_F(WmiSmbBackendTest, RemoveKeepsAMappingAnotherLinkStillUsesAndTheLastRemovalUnmaps) {
  ASSERT_TRUE(service_->NewSmbGlobalMapping("\\\\srv\\share\\pv-1", kStage1, "u", "p").ok());
  ASSERT_TRUE(service_->NewSmbGlobalMapping("\\\\srv\\share\\pv-2", kStage2, "u", "p").ok());
  EXPECT_EQ(Creates().size(), 1u);  // one global mapping for both volumes

  // Trident: Rmdir of pv-1's staging link, then RemoveSmbGlobalMapping: pv-2 still uses the share.
  RmdirLink(kStage1);
  EXPECT_TRUE(smb_.IsMapped("\\\\srv\\share"));
  ASSERT_TRUE(service_->RemoveSmbGlobalMapping("\\\\srv\\share").ok());
  EXPECT_TRUE(smb_.IsMapped("\\\\srv\\share"));
  EXPECT_NE(log_.find("stays: it is still used by 1 local_path link"), std::string::npos) << log_;
  EXPECT_TRUE(Removes().empty());

  // The last link's removal unmaps (azurefile never calls RemoveSmbGlobalMapping).
  RmdirLink(kStage2);
  EXPECT_FALSE(smb_.IsMapped("\\\\srv\\share"));
  ASSERT_EQ(Removes().size(), 1u);
  // A RemoveSmbGlobalMapping after that finds nothing to do, and says nothing went wrong.
  EXPECT_TRUE(service_->RemoveSmbGlobalMapping("\\\\srv\\share").ok());
  EXPECT_EQ(Removes().size(), 1u);
}

TEST_F(WmiSmbBackendTest, CsiDriverSmbsRemoveWhileItsStagingLinkExistsKeepsTheMappingUntilTheRmdir) {
  ASSERT_TRUE(service_->NewSmbGlobalMapping("\\\\srv\\share\\pv-1", kStage1, "u", "p").ok());
  ASSERT_TRUE(service_->RemoveSmbGlobalMapping("\\\\srv\\share").ok());
  EXPECT_TRUE(smb_.IsMapped("\\\\srv\\share"));
  RmdirLink(kStage1);
  EXPECT_FALSE(smb_.IsMapped("\\\\srv\\share"));
}

TEST_F(WmiSmbBackendTest, AMappingMadeWithoutALocalPathStaysUntilItIsRemoved) {
  ASSERT_TRUE(service_->NewSmbGlobalMapping("\\\\srv\\share", "", "u", "p").ok());
  ASSERT_TRUE(service_->NewSmbGlobalMapping("\\\\srv\\share\\pv-1", kStage1, "u", "p").ok());
  RmdirLink(kStage1);
  EXPECT_TRUE(smb_.IsMapped("\\\\srv\\share"));  // pinned by the mapping without a link
  ASSERT_TRUE(service_->RemoveSmbGlobalMapping("\\\\srv\\share").ok());
  EXPECT_FALSE(smb_.IsMapped("\\\\srv\\share"));
}

TEST_F(WmiSmbBackendTest, TheCountSurvivesARestartOfTheProxy) {
  ASSERT_TRUE(service_->NewSmbGlobalMapping("\\\\srv\\share\\pv-1", kStage1, "u", "p").ok());
  ASSERT_TRUE(service_->NewSmbGlobalMapping("\\\\srv\\share\\pv-2", kStage2, "u", "p").ok());
  StartService();  // a new process: nothing in memory, the records and the links on disk
  ASSERT_TRUE(service_->RemoveSmbGlobalMapping("\\\\srv\\share").ok());
  EXPECT_TRUE(smb_.IsMapped("\\\\srv\\share"));
  RmdirLink(kStage1);
  RmdirLink(kStage2);
  EXPECT_FALSE(smb_.IsMapped("\\\\srv\\share"));
}

TEST_F(WmiSmbBackendTest, ALinkReplacedBySomethingElseNoLongerCounts) {
  ASSERT_TRUE(service_->NewSmbGlobalMapping("\\\\srv\\share\\pv-1", kStage1, "u", "p").ok());
  links_.entries[kStage1] = "";  // kubelet removed the link and made a directory there
  ASSERT_TRUE(service_->RemoveSmbGlobalMapping("\\\\srv\\share").ok());
  EXPECT_FALSE(smb_.IsMapped("\\\\srv\\share"));
}

TEST_F(WmiSmbBackendTest, RetriesSucceedAndNothingIsMadeTwice) {
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(service_->NewSmbGlobalMapping("\\\\srv\\share\\pv-1", kStage1, "u", "p").ok());
  }
  EXPECT_EQ(Creates().size(), 1u);
  RmdirLink(kStage1);
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(service_->RemoveSmbGlobalMapping("\\\\srv\\share").ok());
  EXPECT_EQ(Removes().size(), 1u);  // the first RmdirLink unmapped it; the removals found nothing
}

TEST_F(WmiSmbBackendTest, TheLocalPathIsCheckedBeforeAnythingIsMapped) {
  links_.entries[kStage1] = "";  // a directory in the way
  Status taken = service_->NewSmbGlobalMapping("\\\\srv\\share", kStage1, "u", "p");
  EXPECT_EQ(taken.code(), Code::kAlreadyExists) << taken.message();
  links_.missing_parents.insert("/var/lib/kubelet/plugins/smb/pv-2");
  EXPECT_EQ(service_->NewSmbGlobalMapping("\\\\srv\\share", kStage2, "u", "p").code(), Code::kNotFound);
  EXPECT_EQ(service_->NewSmbGlobalMapping("\\\\srv\\share", "C:\\elsewhere", "u", "p").code(), Code::kInvalidArgument);
  EXPECT_TRUE(Creates().empty());
}

// The errors the SMB client documents for a mapping, as the codes a driver can act on.
TEST_F(WmiSmbBackendTest, TheSmbClientsErrorsBecomeCodesAndLeaveNothingBehind) {
  const struct {
    uint32_t hresult;
    Code code;
    const char* name;
  } cases[] = {
      {0x8007052E, Code::kPermissionDenied, "ERROR_LOGON_FAILURE"},
      {0x80070005, Code::kPermissionDenied, "E_ACCESSDENIED"},
      {0x80070043, Code::kNotFound, "ERROR_BAD_NET_NAME"},
      {0x80070035, Code::kUnavailable, "ERROR_BAD_NETPATH"},
      {0x800704C3, Code::kFailedPrecondition, "ERROR_SESSION_CREDENTIAL_CONFLICT"},
  };
  for (const auto& c : cases) {
    smb_.FailNextCreate(c.hresult);
    Status s = service_->NewSmbGlobalMapping("\\\\srv\\share\\pv-1", kStage1, "CONTOSO\\svc", kPassword);
    EXPECT_EQ(s.code(), c.code) << s.message();
    EXPECT_NE(s.message().find(c.name), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("mapping \\\\srv\\share"), std::string::npos) << s.message();
    EXPECT_FALSE(smb_.IsMapped("\\\\srv\\share"));
    EXPECT_TRUE(links_.entries.empty());  // no link to a mapping that was not made
  }
}

TEST_F(WmiSmbBackendTest, ARemovalTheSmbClientRefusesIsAnErrorAndTheMappingStays) {
  ASSERT_TRUE(service_->NewSmbGlobalMapping("\\\\srv\\share", "", "u", "p").ok());
  smb_.FailNextRemove(0x80070964);  // ERROR_DEVICE_IN_USE
  Status s = service_->RemoveSmbGlobalMapping("\\\\srv\\share");
  EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.message();
  EXPECT_TRUE(smb_.IsMapped("\\\\srv\\share"));
}

TEST_F(WmiSmbBackendTest, ACreateThatMadeNothingIsNotASuccess) {
  smb_.CreateMakesNothing();
  Status s = service_->NewSmbGlobalMapping("\\\\srv\\share", kStage1, "u", "p");
  EXPECT_EQ(s.code(), Code::kInternal) << s.message();
  EXPECT_NE(s.message().find("answered success, but no global mapping"), std::string::npos) << s.message();
  EXPECT_TRUE(links_.entries.empty());
}

TEST_F(WmiSmbBackendTest, WithoutTheSmbClientsWmiEveryMethodIsUnimplementedNamingTheNamespace) {
  RecordedWmi bare;  // a system without ROOT\Microsoft\Windows\SMB (Wine's)
  auto policy = common::PathPolicy::Create(kKubelet, {});
  SmbBackendOptions options;
  options.state_dir = state_.path();
  WmiSmbSystem system{bare.Connector(), std::make_unique<LinksView>(links_), Users()};
  SmbService service(MakeWmiSmbBackend(options, *policy, std::move(system)), *policy, {});
  for (Status s : {service.NewSmbGlobalMapping("\\\\srv\\share", kStage1, "u", kPassword),
                   service.RemoveSmbGlobalMapping("\\\\srv\\share")}) {
    EXPECT_EQ(s.code(), Code::kUnimplemented) << s.message();
    EXPECT_NE(s.message().find("ROOT\\Microsoft\\Windows\\SMB"), std::string::npos) << s.message();
  }
  EXPECT_TRUE(links_.entries.empty());
}

TEST_F(WmiSmbBackendTest, ThePasswordReachesOnlyTheCreateArgumentNeverALogLineOrAnError) {
  ASSERT_TRUE(service_->NewSmbGlobalMapping("\\\\srv\\share\\pv-1", kStage1, "CONTOSO\\svc", kPassword).ok());
  smb_.FailNextCreate(0x8007052E);
  Status failed = service_->NewSmbGlobalMapping("\\\\srv\\other\\pv-2", kStage2, "CONTOSO\\svc", kPassword);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(log_.find("as CONTOSO\\svc"), std::string::npos) << log_;  // the log does say who maps
  EXPECT_EQ(log_.find("s3cr3t"), std::string::npos) << log_;
  EXPECT_EQ(failed.message().find("s3cr3t"), std::string::npos) << failed.message();
  for (const auto& query : wmi_.queries()) EXPECT_EQ(query.find("s3cr3t"), std::string::npos) << query;
  // Where it does go: the Credential argument of each Create, and nowhere else among the calls.
  for (const auto& call : wmi_.calls()) {
    for (const auto& [name, value] : call.in) {
      if (Text(value).find("s3cr3t") != std::string::npos) {
        EXPECT_EQ(name, "Credential");
      }
    }
  }
  EXPECT_EQ(Creates().size(), 2u);
}

}  // namespace
}  // namespace csi_proxy::smb

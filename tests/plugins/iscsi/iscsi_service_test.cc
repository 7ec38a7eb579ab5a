// The iSCSI service with the real Linux backend: upstream's portal sequence, discovery against a real target
// (tgtd on loopback), state across a restart, the refusals, the injection suite, and the connect path.
#include "iscsi_service.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <mutex>

#include <gtest/gtest.h>

#include "iscsi_backend_linux.h"
#include "temp_dir.h"
#include "tgt_target.h"

namespace csi_proxy::iscsi {
namespace {

using test_support::TgtTarget;
using test_support::TgtTargetOptions;

// Forwards to the real backend and counts the calls: proof that a refused request never reached the OS layer.
class CountingBackend final : public IscsiBackend {
 public:
  CountingBackend(std::unique_ptr<IscsiBackend> real, std::atomic<int>& mutating_calls)
      : real_(std::move(real)), calls_(mutating_calls) {}
  StatusOr<std::vector<Portal>> ListPortals() override { return real_->ListPortals(); }
  Status AddPortal(const Portal& p) override { return ++calls_, real_->AddPortal(p); }
  Status RemovePortal(const Portal& p) override { return ++calls_, real_->RemovePortal(p); }
  StatusOr<std::vector<std::string>> DiscoverTargets(const Portal& p) override {
    return ++calls_, real_->DiscoverTargets(p);
  }
  Status Connect(const Portal& p, const std::string& iqn, const ChapLogin& l) override {
    return ++calls_, real_->Connect(p, iqn, l);
  }
  Status Disconnect(const Portal& p, const std::string& iqn) override { return ++calls_, real_->Disconnect(p, iqn); }
  StatusOr<std::vector<uint64_t>> TargetDisks(const Portal& p, const std::string& iqn) override {
    return ++calls_, real_->TargetDisks(p, iqn);
  }
  Status SetMutualChapSecret(const std::string& s) override { return ++calls_, real_->SetMutualChapSecret(s); }

 private:
  std::unique_ptr<IscsiBackend> real_;
  std::atomic<int>& calls_;
};

class IscsiServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_.path();
    state_dir_ = root_ + "/state";
    StartService();
  }
  void TearDown() override { service_.reset(); }

  // (Re)starts the service on the same state directory, as a proxy restart does.
  void StartService() {
    service_.reset();
    LinuxIscsiOptions options;
    options.state_dir = state_dir_;
    options.initiator_name = "iqn.2024-01.io.k8s.csi-proxy.test:initiator";
    options.discovery_timeout = std::chrono::seconds(10);
    options.log = [this](LogLevel, std::string_view line) {
      std::lock_guard lock(log_mu_);
      log_ += std::string(line) + "\n";
    };
    auto backend = MakeLinuxIscsiBackend(options);
    ASSERT_TRUE(backend.ok()) << backend.status().message();
    service_ = std::make_unique<IscsiService>(std::make_unique<CountingBackend>(std::move(*backend), backend_calls_),
                                              options.log);
  }

  std::string Log() {
    std::lock_guard lock(log_mu_);
    return log_;
  }

  std::vector<std::string> StateFiles() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(state_dir_)) names.push_back(e.path().filename());
    return names;
  }

  testing::TempDir dir_;
  std::string root_, state_dir_;
  std::unique_ptr<IscsiService> service_;
  std::atomic<int> backend_calls_{0};
  std::mutex log_mu_;
  std::string log_;
};

#define START_TARGET_OR_SKIP(var, options)              \
  std::string why_not_##var;                            \
  auto var = TgtTarget::Start(options, &why_not_##var); \
  if (!var) GTEST_SKIP() << "no iSCSI target: " << why_not_##var

PortalRequest At(const std::string& address, uint32_t port) { return PortalRequest{address, port}; }

// Upstream's portal test: empty list, add, the list shows it with port 3260, remove, empty list.
TEST_F(IscsiServiceTest, PortalSequenceAddListRemove) {
  EXPECT_TRUE(service_->ListTargetPortals()->empty());
  ASSERT_TRUE(service_->AddTargetPortal(At("127.0.0.1", 3260)).ok());
  auto portals = *service_->ListTargetPortals();
  ASSERT_EQ(portals.size(), 1u);
  EXPECT_EQ(portals[0].address, "127.0.0.1");
  EXPECT_EQ(portals[0].port, 3260);
  ASSERT_TRUE(service_->RemoveTargetPortal(At("127.0.0.1", 3260)).ok());
  EXPECT_TRUE(service_->ListTargetPortals()->empty());
}

TEST_F(IscsiServiceTest, PortalAddedWithPortZeroIsListedWithPort3260) {
  ASSERT_TRUE(service_->AddTargetPortal(At("127.0.0.1", 0)).ok());
  auto portals = *service_->ListTargetPortals();
  ASSERT_EQ(portals.size(), 1u);
  EXPECT_EQ(portals[0].port, 3260);
  ASSERT_TRUE(service_->RemoveTargetPortal(At("127.0.0.1", 0)).ok());
  EXPECT_TRUE(service_->ListTargetPortals()->empty());
}

TEST_F(IscsiServiceTest, AddingAPortalTwiceListsItOnce) {
  ASSERT_TRUE(service_->AddTargetPortal(At("127.0.0.1", 3260)).ok());
  ASSERT_TRUE(service_->AddTargetPortal(At("127.0.0.1", 0)).ok());
  EXPECT_EQ(service_->ListTargetPortals()->size(), 1u);
}

TEST_F(IscsiServiceTest, RemovingAnUnregisteredPortalSucceeds) {
  EXPECT_TRUE(service_->RemoveTargetPortal(At("127.0.0.1", 3260)).ok());
}

TEST_F(IscsiServiceTest, PortalsAndTheMutualSecretSurviveARestart) {
  ASSERT_TRUE(service_->AddTargetPortal(At("127.0.0.1", 3260)).ok());
  ASSERT_TRUE(service_->AddTargetPortal(At("storage.example.com", 13260)).ok());
  ASSERT_TRUE(service_->SetMutualChapSecret("mutual-secret-1").ok());
  StartService();
  auto portals = *service_->ListTargetPortals();
  ASSERT_EQ(portals.size(), 2u);
  EXPECT_EQ(portals[0], (Portal{"127.0.0.1", 3260}));
  EXPECT_EQ(portals[1], (Portal{"storage.example.com", 13260}));
  struct stat st {};
  ASSERT_EQ(stat((state_dir_ + "/mutual-chap-secret").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(IscsiServiceTest, DiscoverReturnsTheTargetsIqn) {
  START_TARGET_OR_SKIP(target, TgtTargetOptions{});
  ASSERT_TRUE(service_->AddTargetPortal(At(target->address(), target->port())).ok());
  auto iqns = service_->DiscoverTargetPortal(At(target->address(), target->port()));
  ASSERT_TRUE(iqns.ok()) << iqns.status().message();
  EXPECT_EQ(*iqns, target->iqns());
}

TEST_F(IscsiServiceTest, DiscoverOnAnUnregisteredPortalIsNotFound) {
  START_TARGET_OR_SKIP(target, TgtTargetOptions{});
  auto iqns = service_->DiscoverTargetPortal(At(target->address(), target->port()));
  EXPECT_EQ(iqns.status().code(), Code::kNotFound) << iqns.status().message();
}

TEST_F(IscsiServiceTest, DiscoverOnARegisteredPortalNobodyServesIsUnavailable) {
  ASSERT_TRUE(service_->AddTargetPortal(At("127.0.0.1", 1)).ok());
  auto iqns = service_->DiscoverTargetPortal(At("127.0.0.1", 1));
  EXPECT_EQ(iqns.status().code(), Code::kUnavailable) << iqns.status().message();
}

TEST_F(IscsiServiceTest, DiscoveryStillWorksAfterARestart) {
  START_TARGET_OR_SKIP(target, TgtTargetOptions{});
  ASSERT_TRUE(service_->AddTargetPortal(At(target->address(), target->port())).ok());
  StartService();
  auto iqns = service_->DiscoverTargetPortal(At(target->address(), target->port()));
  ASSERT_TRUE(iqns.ok()) << iqns.status().message();
  EXPECT_EQ(*iqns, target->iqns());
}

TEST_F(IscsiServiceTest, EveryRequestWithoutATargetPortalIsInvalidArgument) {
  const OptionalPortal none;
  const std::string iqn = "iqn.2024-01.io.example:t";
  EXPECT_EQ(service_->AddTargetPortal(none).code(), Code::kInvalidArgument);
  EXPECT_EQ(service_->DiscoverTargetPortal(none).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(service_->RemoveTargetPortal(none).code(), Code::kInvalidArgument);
  EXPECT_EQ(service_->ConnectTarget({none, iqn, 0, "", ""}).code(), Code::kInvalidArgument);
  EXPECT_EQ(service_->DisconnectTarget(none, iqn).code(), Code::kInvalidArgument);
  EXPECT_EQ(service_->GetTargetDisks(none, iqn).status().code(), Code::kInvalidArgument);
  EXPECT_NE(service_->AddTargetPortal(none).message().find("target_portal"), std::string::npos);
  EXPECT_EQ(backend_calls_, 0);
}

TEST_F(IscsiServiceTest, ConnectToAnUnregisteredPortalIsNotFound) {
  auto status = service_->ConnectTarget({At("127.0.0.1", 3260), "iqn.2024-01.io.example:t", 0, "", ""});
  EXPECT_EQ(status.code(), Code::kNotFound) << status.message();
}

TEST_F(IscsiServiceTest, ChapWithoutASecretIsInvalidArgument) {
  ASSERT_TRUE(service_->AddTargetPortal(At("127.0.0.1", 3260)).ok());
  auto status = service_->ConnectTarget({At("127.0.0.1", 3260), "iqn.2024-01.io.example:t", 1, "user", ""});
  EXPECT_EQ(status.code(), Code::kInvalidArgument);
  status = service_->ConnectTarget({At("127.0.0.1", 3260), "iqn.2024-01.io.example:t", 7, "", ""});
  EXPECT_EQ(status.code(), Code::kInvalidArgument);
}

// This machine's kernel has no iSCSI initiator; the connect path must say so, leave nothing behind, and keep the
// CHAP secret out of every message and log line.
TEST_F(IscsiServiceTest, ConnectWithoutAKernelInitiatorIsFailedPrecondition) {
  if (EnsureKernelInitiator("/sys").ok()) GTEST_SKIP() << "this kernel has an iSCSI initiator";
  START_TARGET_OR_SKIP(target, TgtTargetOptions{});
  const std::string iqn = target->iqns()[0];
  const std::string secret = "Chap-Secret-" + std::to_string(getpid());
  ASSERT_TRUE(service_->AddTargetPortal(At(target->address(), target->port())).ok());
  auto status = service_->ConnectTarget({At(target->address(), target->port()), iqn, 1, "chapuser", secret});
  EXPECT_EQ(status.code(), Code::kFailedPrecondition) << status.message();
  EXPECT_NE(status.message().find("iSCSI initiator"), std::string::npos) << status.message();
  EXPECT_EQ(status.message().find(secret), std::string::npos);
  EXPECT_EQ(Log().find(secret), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists("/etc/iscsi/nodes/" + iqn));
  // Disconnecting what never connected succeeds, and the session has no disks.
  EXPECT_TRUE(service_->DisconnectTarget(At(target->address(), target->port()), iqn).ok());
  auto disks = service_->GetTargetDisks(At(target->address(), target->port()), iqn);
  ASSERT_TRUE(disks.ok()) << disks.status().message();
  EXPECT_TRUE(disks->empty());
}

// Where the kernel can log in: upstream's full flow (add, discover, connect, one disk, disconnect).
TEST_F(IscsiServiceTest, ConnectGetTargetDisksDisconnect) {
  if (!EnsureKernelInitiator("/sys").ok()) GTEST_SKIP() << EnsureKernelInitiator("/sys").message();
  if (!CheckIscsidRunning().ok()) GTEST_SKIP() << CheckIscsidRunning().message();
  START_TARGET_OR_SKIP(target, TgtTargetOptions{});
  const auto portal = At(target->address(), target->port());
  const std::string iqn = target->iqns()[0];
  ASSERT_TRUE(service_->AddTargetPortal(portal).ok());
  ASSERT_TRUE(service_->ConnectTarget({portal, iqn, 0, "", ""}).ok());
  ASSERT_TRUE(service_->ConnectTarget({portal, iqn, 0, "", ""}).ok());  // idempotent while connected
  std::vector<std::string> disks;
  for (int i = 0; i < 100 && disks.empty(); ++i) {
    auto got = service_->GetTargetDisks(portal, iqn);
    ASSERT_TRUE(got.ok()) << got.status().message();
    disks = *got;
    if (disks.empty()) usleep(100 * 1000);
  }
  EXPECT_EQ(disks.size(), 1u);
  ASSERT_TRUE(service_->DisconnectTarget(portal, iqn).ok());
  auto after = service_->GetTargetDisks(portal, iqn);
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after->empty());
}

TEST_F(IscsiServiceTest, MutualChapSecretIsValidatedAndNeverLogged) {
  EXPECT_EQ(service_->SetMutualChapSecret("has space").code(), Code::kInvalidArgument);
  const std::string secret = "MutualSecret" + std::to_string(getpid());
  ASSERT_TRUE(service_->SetMutualChapSecret(secret).ok());
  EXPECT_EQ(Log().find(secret), std::string::npos);
  ASSERT_TRUE(service_->SetMutualChapSecret("").ok());
  EXPECT_FALSE(std::filesystem::exists(state_dir_ + "/mutual-chap-secret"));
}

// Shell and mount-option metacharacters in every string field: refused before the backend is reached, and the
// state directory stays empty.
TEST_F(IscsiServiceTest, MetacharactersInAnyFieldAreRefusedAndNothingRuns) {
  const std::vector<std::string> payloads = {"x;touch /tmp/pwned",
                                             "$(touch /tmp/pwned)",
                                             "`touch /tmp/pwned`",
                                             "x|id",
                                             "x&id",
                                             "x>/tmp/f",
                                             "x<y",
                                             "a b",
                                             "x,opt=1",
                                             "x=y",
                                             "x\nInitiatorName=evil",
                                             "x'y",
                                             "x\"y",
                                             "x\\y",
                                             "../../etc",
                                             "--op=delete",
                                             "-o delete",
                                             "x*",
                                             "x?",
                                             "x{a,b}",
                                             "x\t",
                                             std::string("x\0y", 3)};
  const PortalRequest good_portal = At("127.0.0.1", 3260);
  const std::string good_iqn = "iqn.2024-01.io.example:t";
  for (const auto& bad : payloads) {
    SCOPED_TRACE(::testing::PrintToString(bad));
    EXPECT_EQ(service_->AddTargetPortal(At(bad, 3260)).code(), Code::kInvalidArgument);
    EXPECT_EQ(service_->DiscoverTargetPortal(At(bad, 3260)).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(service_->RemoveTargetPortal(At(bad, 3260)).code(), Code::kInvalidArgument);
    EXPECT_EQ(service_->ConnectTarget({At(bad, 3260), good_iqn, 0, "", ""}).code(), Code::kInvalidArgument);
    EXPECT_EQ(service_->ConnectTarget({good_portal, good_iqn + bad, 0, "", ""}).code(), Code::kInvalidArgument);
    EXPECT_EQ(service_->ConnectTarget({good_portal, bad, 0, "", ""}).code(), Code::kInvalidArgument);
    EXPECT_EQ(service_->ConnectTarget({good_portal, good_iqn, 1, "user" + bad, "secret123456"}).code(),
              Code::kInvalidArgument);
    EXPECT_EQ(service_->DisconnectTarget(At(bad, 3260), good_iqn).code(), Code::kInvalidArgument);
    EXPECT_EQ(service_->DisconnectTarget(good_portal, good_iqn + bad).code(), Code::kInvalidArgument);
    EXPECT_EQ(service_->GetTargetDisks(At(bad, 3260), good_iqn).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(service_->GetTargetDisks(good_portal, good_iqn + bad).status().code(), Code::kInvalidArgument);
  }
  // Secrets may contain shell characters (they never meet a shell), but not blanks or control characters.
  for (const std::string& bad :
       std::vector<std::string>{"a b", "x\nnode.startup = automatic", "x\t", std::string("x\0y", 3)}) {
    EXPECT_EQ(service_->ConnectTarget({good_portal, good_iqn, 1, "user", bad}).code(), Code::kInvalidArgument);
    EXPECT_EQ(service_->SetMutualChapSecret(bad).code(), Code::kInvalidArgument);
  }
  EXPECT_EQ(backend_calls_, 0);
  EXPECT_TRUE(StateFiles().empty());
  EXPECT_FALSE(std::filesystem::exists("/tmp/pwned"));
}

}  // namespace
}  // namespace csi_proxy::iscsi

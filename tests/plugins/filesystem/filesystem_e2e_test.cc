// End to end: the real csi-proxy host with the real filesystem group library, called over its real Unix
// sockets with upstream's wire messages, against a real directory tree with real mounts. Every escape attempt
// asserts that nothing outside the allowed roots changed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <thread>
#include <vector>

#include "file_tree.h"
#include "grpc_client.h"
#include "host_process.h"
#include "temp_dir.h"
#include "v1/filesystem.pb.h"
#include "v1alpha1/filesystem.pb.h"
#include "v1beta1/filesystem.pb.h"
#include "v1beta2/filesystem.pb.h"
#include "v2alpha1/filesystem.pb.h"

namespace csi_proxy::filesystem {
namespace {

using csi_proxy::testing::Call;
using csi_proxy::testing::CallRaw;
using csi_proxy::testing::Dial;
using csi_proxy::testing::HostProcess;
using ::testing::HasSubstr;
using testing::IsDirNoFollow;
using testing::IsLinkNoFollow;
using testing::Lexists;
using testing::ReadFile;
using testing::Snapshot;
using testing::TempDir;
using testing::TestMount;
using testing::WriteFile;
namespace fs = std::filesystem;
using Code = grpc::StatusCode;

constexpr const char* kV1 = "csi-proxy-filesystem-v1";
constexpr const char* kV2alpha1 = "csi-proxy-filesystem-v2alpha1";
constexpr const char* kV1alpha1 = "csi-proxy-filesystem-v1alpha1";
constexpr const char* kV1beta1 = "csi-proxy-filesystem-v1beta1";
constexpr const char* kV1beta2 = "csi-proxy-filesystem-v1beta2";

// One API version: its endpoint, its method path prefix and its message types. v1 and v2alpha1 share every
// message shape except RmdirContents, so the client is written once.
struct V1 {
  static constexpr const char* kEndpoint = kV1;
  static constexpr const char* kPrefix = "/v1.Filesystem/";
  using PathExistsRequest = v1::PathExistsRequest;
  using PathExistsResponse = v1::PathExistsResponse;
  using MkdirRequest = v1::MkdirRequest;
  using MkdirResponse = v1::MkdirResponse;
  using RmdirRequest = v1::RmdirRequest;
  using RmdirResponse = v1::RmdirResponse;
  using CreateSymlinkRequest = v1::CreateSymlinkRequest;
  using CreateSymlinkResponse = v1::CreateSymlinkResponse;
  using IsSymlinkRequest = v1::IsSymlinkRequest;
  using IsSymlinkResponse = v1::IsSymlinkResponse;
};

struct V2alpha1 {
  static constexpr const char* kEndpoint = kV2alpha1;
  static constexpr const char* kPrefix = "/v2alpha1.Filesystem/";
  using PathExistsRequest = v2alpha1::PathExistsRequest;
  using PathExistsResponse = v2alpha1::PathExistsResponse;
  using MkdirRequest = v2alpha1::MkdirRequest;
  using MkdirResponse = v2alpha1::MkdirResponse;
  using RmdirRequest = v2alpha1::RmdirRequest;
  using RmdirResponse = v2alpha1::RmdirResponse;
  using CreateSymlinkRequest = v2alpha1::CreateSymlinkRequest;
  using CreateSymlinkResponse = v2alpha1::CreateSymlinkResponse;
  using IsSymlinkRequest = v2alpha1::IsSymlinkRequest;
  using IsSymlinkResponse = v2alpha1::IsSymlinkResponse;
};

struct V1beta2 {
  static constexpr const char* kEndpoint = kV1beta2;
  static constexpr const char* kPrefix = "/v1beta2.Filesystem/";
  using PathExistsRequest = v1beta2::PathExistsRequest;
  using PathExistsResponse = v1beta2::PathExistsResponse;
  using MkdirRequest = v1beta2::MkdirRequest;
  using MkdirResponse = v1beta2::MkdirResponse;
  using RmdirRequest = v1beta2::RmdirRequest;
  using RmdirResponse = v1beta2::RmdirResponse;
  using CreateSymlinkRequest = v1beta2::CreateSymlinkRequest;
  using CreateSymlinkResponse = v1beta2::CreateSymlinkResponse;
  using IsSymlinkRequest = v1beta2::IsSymlinkRequest;
  using IsSymlinkResponse = v1beta2::IsSymlinkResponse;
};

// v1alpha1 and v1beta1 have the same shape: a PathContext on path requests, LinkPath and IsMountPoint, and an
// `error` string in every response.
#define CSI_PROXY_LEGACY_API(Name, ns)                             \
  struct Name {                                                    \
    static constexpr const char* kEndpoint = k##Name;              \
    static constexpr const char* kPrefix = "/" #ns ".Filesystem/"; \
    using PathContext = ns::PathContext;                           \
    static constexpr PathContext kPlugin = ns::PLUGIN;             \
    static constexpr PathContext kPod = ns::POD;                   \
    using PathExistsRequest = ns::PathExistsRequest;               \
    using PathExistsResponse = ns::PathExistsResponse;             \
    using MkdirRequest = ns::MkdirRequest;                         \
    using MkdirResponse = ns::MkdirResponse;                       \
    using RmdirRequest = ns::RmdirRequest;                         \
    using RmdirResponse = ns::RmdirResponse;                       \
    using LinkPathRequest = ns::LinkPathRequest;                   \
    using LinkPathResponse = ns::LinkPathResponse;                 \
    using IsMountPointRequest = ns::IsMountPointRequest;           \
    using IsMountPointResponse = ns::IsMountPointResponse;         \
  };
CSI_PROXY_LEGACY_API(V1alpha1, v1alpha1)
CSI_PROXY_LEGACY_API(V1beta1, v1beta1)
#undef CSI_PROXY_LEGACY_API

template <typename Api>
class Client {
 public:
  explicit Client(std::shared_ptr<grpc::Channel> channel) : channel_(std::move(channel)) {}

  std::pair<grpc::Status, bool> PathExists(const std::string& path) {
    typename Api::PathExistsRequest req;
    req.set_path(path);
    typename Api::PathExistsResponse resp;
    auto s = Call(channel_, std::string(Api::kPrefix) + "PathExists", req, &resp);
    return {s, resp.exists()};
  }
  grpc::Status Mkdir(const std::string& path) {
    typename Api::MkdirRequest req;
    req.set_path(path);
    typename Api::MkdirResponse resp;
    return Call(channel_, std::string(Api::kPrefix) + "Mkdir", req, &resp);
  }
  grpc::Status Rmdir(const std::string& path, bool force) {
    typename Api::RmdirRequest req;
    req.set_path(path);
    req.set_force(force);
    typename Api::RmdirResponse resp;
    return Call(channel_, std::string(Api::kPrefix) + "Rmdir", req, &resp);
  }
  grpc::Status CreateSymlink(const std::string& source, const std::string& target) {
    typename Api::CreateSymlinkRequest req;
    req.set_source_path(source);
    req.set_target_path(target);
    typename Api::CreateSymlinkResponse resp;
    return Call(channel_, std::string(Api::kPrefix) + "CreateSymlink", req, &resp);
  }
  std::pair<grpc::Status, bool> IsSymlink(const std::string& path) {
    typename Api::IsSymlinkRequest req;
    req.set_path(path);
    typename Api::IsSymlinkResponse resp;
    auto s = Call(channel_, std::string(Api::kPrefix) + "IsSymlink", req, &resp);
    return {s, resp.is_symlink()};
  }
  grpc::Status RmdirContents(const std::string& path) {
    v2alpha1::RmdirContentsRequest req;
    req.set_path(path);
    v2alpha1::RmdirContentsResponse resp;
    return Call(channel_, std::string(Api::kPrefix) + "RmdirContents", req, &resp);
  }

 private:
  std::shared_ptr<grpc::Channel> channel_;
};

// A client of v1alpha1 or v1beta1. Every answer's `error` string must be empty: failures travel as the status.
template <typename Api>
class LegacyClient {
 public:
  using PathContext = typename Api::PathContext;
  explicit LegacyClient(std::shared_ptr<grpc::Channel> channel) : channel_(std::move(channel)) {}

  std::pair<grpc::Status, bool> PathExists(const std::string& path, PathContext context) {
    typename Api::PathExistsRequest req;
    req.set_path(path);
    req.set_context(context);
    typename Api::PathExistsResponse resp;
    auto s = Call(channel_, std::string(Api::kPrefix) + "PathExists", req, &resp);
    EXPECT_EQ(resp.error(), "");
    return {s, resp.exists()};
  }
  grpc::Status Mkdir(const std::string& path, PathContext context) {
    typename Api::MkdirRequest req;
    req.set_path(path);
    req.set_context(context);
    typename Api::MkdirResponse resp;
    auto s = Call(channel_, std::string(Api::kPrefix) + "Mkdir", req, &resp);
    EXPECT_EQ(resp.error(), "");
    return s;
  }
  grpc::Status Rmdir(const std::string& path, PathContext context, bool force) {
    typename Api::RmdirRequest req;
    req.set_path(path);
    req.set_context(context);
    req.set_force(force);
    typename Api::RmdirResponse resp;
    auto s = Call(channel_, std::string(Api::kPrefix) + "Rmdir", req, &resp);
    EXPECT_EQ(resp.error(), "");
    return s;
  }
  grpc::Status LinkPath(const std::string& source, const std::string& target) {
    typename Api::LinkPathRequest req;
    req.set_source_path(source);
    req.set_target_path(target);
    typename Api::LinkPathResponse resp;
    auto s = Call(channel_, std::string(Api::kPrefix) + "LinkPath", req, &resp);
    EXPECT_EQ(resp.error(), "");
    return s;
  }
  std::pair<grpc::Status, bool> IsMountPoint(const std::string& path) {
    typename Api::IsMountPointRequest req;
    req.set_path(path);
    typename Api::IsMountPointResponse resp;
    auto s = Call(channel_, std::string(Api::kPrefix) + "IsMountPoint", req, &resp);
    EXPECT_EQ(resp.error(), "");
    return {s, resp.is_mount_point()};
  }

 private:
  std::shared_ptr<grpc::Channel> channel_;
};

// sandbox/kubelet (the kubelet path) and sandbox/work (a working dir) are the allowed roots;
// sandbox/kubelet-evil (a string-prefix sibling) and sandbox/outside are not.
class FilesystemEndToEnd : public ::testing::Test {
 protected:
  FilesystemEndToEnd()
      // The largest request the host accepts: so that the group's own bounds are tried too, not only the host's
      // default of 64 KiB (which refuses a multi-MiB path before the group sees it).
      : host_("[groups.filesystem]\nenabled = true\nrequired = true\nmax_request_bytes = 16777216\n",
              "kubelet_path = \"" + kubelet_ + "\"\nworking_dirs = [\"" + work_ + "\"]\n") {}

  void SetUp() override {
    fs::create_directories(kubelet_);
    fs::create_directories(work_);
    WriteFile(evil_ + "/victim.txt", "victim");
    WriteFile(outside_ + "/secret.txt", "top secret");
    WriteFile(outside_ + "/dir/inner.txt", "inner");
    ASSERT_TRUE(host_.Start({kV1, kV2alpha1, kV1alpha1, kV1beta1, kV1beta2})) << host_.error();
  }

  // Everything outside the allowed roots that a request could try to reach.
  std::map<std::string, std::string> OutsideState() {
    auto state = Snapshot(outside_);
    for (auto& [k, v] : Snapshot(evil_)) state["kubelet-evil/" + k] = v;
    return state;
  }

  std::string Roots() const { return "[" + kubelet_ + ", " + work_ + "]"; }

  TempDir sandbox_;  // declared first: removed last, after the host has stopped and mounts are gone
  std::string kubelet_ = sandbox_.Sub("kubelet");
  std::string work_ = sandbox_.Sub("work");
  std::string evil_ = sandbox_.Sub("kubelet-evil");
  std::string outside_ = sandbox_.Sub("outside");
  HostProcess host_;
  Client<V1> v1_{Dial(host_.endpoint(kV1))};
  Client<V2alpha1> v2_{Dial(host_.endpoint(kV2alpha1))};
  Client<V1beta2> v1beta2_{Dial(host_.endpoint(kV1beta2))};
  LegacyClient<V1alpha1> v1alpha1_{Dial(host_.endpoint(kV1alpha1))};
  LegacyClient<V1beta1> v1beta1_{Dial(host_.endpoint(kV1beta1))};
};

// upstream's filesystem integration sequence, once per served version.
template <typename Api>
void RunUpstreamSequence(Client<Api>& client, const std::string& kubelet, int n) {
  SCOPED_TRACE(Api::kEndpoint);
  const std::string stage = kubelet + "/testdir/testplugin-" + std::to_string(n) + ".csi.io/volume" + std::to_string(n);
  const std::string pod = kubelet + "/testdir/test-pod-id/volumes/kubernetes.io~csi/pvc-test" + std::to_string(n);

  ASSERT_TRUE(client.Mkdir(stage).ok());
  EXPECT_TRUE(client.PathExists(stage).second);
  ASSERT_TRUE(client.Mkdir(pod).ok());
  EXPECT_TRUE(client.PathExists(pod).second);
  WriteFile(stage + "/data.txt", "staged data");

  auto link = client.CreateSymlink(stage, pod + "/rootvol");
  ASSERT_TRUE(link.ok()) << link.error_message();
  EXPECT_TRUE(client.PathExists(pod + "/rootvol").second);
  auto is_link = client.IsSymlink(pod + "/rootvol");
  ASSERT_TRUE(is_link.first.ok()) << is_link.first.error_message();
  EXPECT_TRUE(is_link.second);

  ASSERT_TRUE(client.Rmdir(pod, true).ok());
  auto gone = client.PathExists(pod);
  ASSERT_TRUE(gone.first.ok());
  EXPECT_FALSE(gone.second);
  EXPECT_EQ(ReadFile(stage + "/data.txt"), "staged data");  // the stage dir survives

  ASSERT_TRUE(client.Rmdir(stage, true).ok());
  EXPECT_FALSE(client.PathExists(stage).second);
  EXPECT_FALSE(Lexists(stage));
}

TEST_F(FilesystemEndToEnd, UpstreamSequenceOnV1) { RunUpstreamSequence(v1_, kubelet_, 1); }
TEST_F(FilesystemEndToEnd, UpstreamSequenceOnV2alpha1) { RunUpstreamSequence(v2_, kubelet_, 2); }

// ---- the older versions: the same service behind older names and messages ----

// upstream's sequence on v1alpha1 and v1beta1: CreateSymlink is LinkPath, IsSymlink is IsMountPoint, and the
// plugin and pod contexts are accepted but change nothing.
template <typename Api>
void RunLegacyUpstreamSequence(LegacyClient<Api>& client, const std::string& kubelet, int n) {
  SCOPED_TRACE(Api::kEndpoint);
  const std::string stage = kubelet + "/testdir/testplugin-" + std::to_string(n) + ".csi.io/volume" + std::to_string(n);
  const std::string pod = kubelet + "/testdir/test-pod-id/volumes/kubernetes.io~csi/pvc-test" + std::to_string(n);

  ASSERT_TRUE(client.Mkdir(stage, Api::kPlugin).ok());
  EXPECT_TRUE(client.PathExists(stage, Api::kPlugin).second);
  ASSERT_TRUE(client.Mkdir(pod, Api::kPod).ok());
  EXPECT_TRUE(client.PathExists(pod, Api::kPod).second);
  WriteFile(stage + "/data.txt", "staged data");

  auto link = client.LinkPath(stage, pod + "/rootvol");
  ASSERT_TRUE(link.ok()) << link.error_message();
  EXPECT_TRUE(IsLinkNoFollow(pod + "/rootvol"));
  EXPECT_TRUE(client.PathExists(pod + "/rootvol", Api::kPod).second);
  auto is_link = client.IsMountPoint(pod + "/rootvol");
  ASSERT_TRUE(is_link.first.ok()) << is_link.first.error_message();
  EXPECT_TRUE(is_link.second);
  auto plain = client.IsMountPoint(stage);
  ASSERT_TRUE(plain.first.ok()) << plain.first.error_message();
  EXPECT_FALSE(plain.second);
  EXPECT_EQ(client.IsMountPoint(pod + "/missing").first.error_code(), Code::NOT_FOUND);

  ASSERT_TRUE(client.Rmdir(pod, Api::kPod, true).ok());
  auto gone = client.PathExists(pod, Api::kPod);
  ASSERT_TRUE(gone.first.ok());
  EXPECT_FALSE(gone.second);
  EXPECT_EQ(ReadFile(stage + "/data.txt"), "staged data");  // the stage dir survives

  ASSERT_TRUE(client.Rmdir(stage, Api::kPlugin, true).ok());
  EXPECT_FALSE(client.PathExists(stage, Api::kPlugin).second);
  EXPECT_FALSE(Lexists(stage));
}

TEST_F(FilesystemEndToEnd, UpstreamSequenceOnV1alpha1) { RunLegacyUpstreamSequence(v1alpha1_, kubelet_, 3); }
TEST_F(FilesystemEndToEnd, UpstreamSequenceOnV1beta1) { RunLegacyUpstreamSequence(v1beta1_, kubelet_, 4); }

TEST_F(FilesystemEndToEnd, EveryMethodIsServedOnV1beta2) {
  ASSERT_TRUE(v1beta2_.Mkdir(kubelet_ + "/stage").ok());
  EXPECT_TRUE(IsDirNoFollow(kubelet_ + "/stage"));
  EXPECT_TRUE(v1beta2_.PathExists(kubelet_ + "/stage").second);
  ASSERT_TRUE(v1beta2_.CreateSymlink(kubelet_ + "/stage", kubelet_ + "/link").ok());
  auto is_link = v1beta2_.IsSymlink(kubelet_ + "/link");
  ASSERT_TRUE(is_link.first.ok()) << is_link.first.error_message();
  EXPECT_TRUE(is_link.second);
  ASSERT_TRUE(v1beta2_.Rmdir(kubelet_ + "/link", false).ok());
  EXPECT_FALSE(Lexists(kubelet_ + "/link"));
  EXPECT_TRUE(IsDirNoFollow(kubelet_ + "/stage"));  // the link went, never its target
}

// Each version serves its own method names only; what it lacks is UNIMPLEMENTED.
TEST_F(FilesystemEndToEnd, EachVersionServesItsOwnMethodNames) {
  auto unimplemented = [&](const char* endpoint, const std::string& method) {
    std::string out;
    auto s = CallRaw(Dial(host_.endpoint(endpoint)), method, "", &out);
    EXPECT_EQ(s.error_code(), Code::UNIMPLEMENTED) << endpoint << " " << method << ": " << s.error_message();
  };
  for (const char* method : {"CreateSymlink", "IsSymlink", "RmdirContents"}) {
    unimplemented(kV1alpha1, std::string("/v1alpha1.Filesystem/") + method);
    unimplemented(kV1beta1, std::string("/v1beta1.Filesystem/") + method);
  }
  for (const char* method : {"LinkPath", "IsMountPoint"}) {
    unimplemented(kV1, std::string("/v1.Filesystem/") + method);
    unimplemented(kV1beta2, std::string("/v1beta2.Filesystem/") + method);
    unimplemented(kV2alpha1, std::string("/v2alpha1.Filesystem/") + method);
  }
  unimplemented(kV1beta2, "/v1beta2.Filesystem/RmdirContents");
  // Another version's package on an endpoint is not served there either.
  unimplemented(kV1alpha1, "/v1.Filesystem/PathExists");
}

// Requests and answers encoded by hand, so that a wrong field number in this repository's own protos would show:
// v1alpha1 and v1beta1 put `context` at 2 and `force` at 3 and their answers' bools at 2 (after `error`); v1beta2
// has v1's numbers.
std::string Field(char tag, const std::string& value) {
  EXPECT_LT(value.size(), 128u);  // a one-byte length
  return std::string(1, tag) + static_cast<char>(value.size()) + value;
}

TEST_F(FilesystemEndToEnd, OldVersionsUseUpstreamsFieldNumbersOnTheWire) {
  const std::string kPodContext("\x10\x01", 2);  // context = POD
  for (const char* version : {"v1alpha1", "v1beta1"}) {
    SCOPED_TRACE(version);
    auto channel = Dial(host_.endpoint(std::string("csi-proxy-filesystem-") + version));
    const std::string prefix = std::string("/") + version + ".Filesystem/";
    const std::string dir = kubelet_ + "/wire-" + version;
    std::string out;
    ASSERT_TRUE(CallRaw(channel, prefix + "Mkdir", Field(0x0a, dir + "/stage") + kPodContext, &out).ok());
    EXPECT_TRUE(IsDirNoFollow(dir + "/stage"));
    ASSERT_TRUE(CallRaw(channel, prefix + "PathExists", Field(0x0a, dir + "/stage") + kPodContext, &out).ok());
    EXPECT_EQ(out, std::string("\x10\x01", 2));  // exists = true at 2, error empty
    ASSERT_TRUE(
        CallRaw(channel, prefix + "LinkPath", Field(0x0a, dir + "/stage") + Field(0x12, dir + "/link"), &out).ok());
    EXPECT_TRUE(IsLinkNoFollow(dir + "/link"));
    ASSERT_TRUE(CallRaw(channel, prefix + "IsMountPoint", Field(0x0a, dir + "/link"), &out).ok());
    EXPECT_EQ(out, std::string("\x10\x01", 2));  // is_mount_point = true at 2
    // force = true at 3: a non-empty directory goes.
    ASSERT_TRUE(
        CallRaw(channel, prefix + "Rmdir", Field(0x0a, dir) + kPodContext + std::string("\x18\x01", 2), &out).ok());
    EXPECT_FALSE(Lexists(dir));
  }

  auto channel = Dial(host_.endpoint(kV1beta2));
  const std::string dir = kubelet_ + "/wire-v1beta2";
  std::string out;
  ASSERT_TRUE(CallRaw(channel, "/v1beta2.Filesystem/Mkdir", Field(0x0a, dir + "/stage"), &out).ok());
  ASSERT_TRUE(CallRaw(channel, "/v1beta2.Filesystem/PathExists", Field(0x0a, dir + "/stage"), &out).ok());
  EXPECT_EQ(out, std::string("\x08\x01", 2));  // exists = true at 1
  ASSERT_TRUE(CallRaw(channel, "/v1beta2.Filesystem/CreateSymlink",
                      Field(0x0a, dir + "/stage") + Field(0x12, dir + "/link"), &out)
                  .ok());
  ASSERT_TRUE(CallRaw(channel, "/v1beta2.Filesystem/IsSymlink", Field(0x0a, dir + "/link"), &out).ok());
  EXPECT_EQ(out, std::string("\x08\x01", 2));  // is_symlink = true at 1
  ASSERT_TRUE(CallRaw(channel, "/v1beta2.Filesystem/Rmdir", Field(0x0a, dir) + std::string("\x10\x01", 2), &out).ok());
  EXPECT_FALSE(Lexists(dir));  // force = true at 2
}

// The older versions get the same path rules: a symlink inside the kubelet path that leads outside lets nothing
// through, whatever the method or the context.
template <typename Api>
std::vector<grpc::Status> LegacyCallsThrough(LegacyClient<Api>& client, const std::string& link,
                                             const std::string& kubelet) {
  return {
      client.PathExists(link + "/secret.txt", Api::kPod).first,
      client.Mkdir(link + "/created/below", Api::kPlugin),
      client.Rmdir(link + "/secret.txt", Api::kPod, false),
      client.Rmdir(link + "/dir", Api::kPlugin, true),
      client.LinkPath(kubelet, link + "/planted"),
      client.LinkPath(link + "/secret.txt", kubelet + "/via-link"),
      client.IsMountPoint(link + "/dir").first,
  };
}

TEST_F(FilesystemEndToEnd, LinkLeadingOutsideLetsNothingThroughOnV1alpha1) {
  fs::create_symlink(outside_, kubelet_ + "/abs-out");
  auto before = OutsideState();
  for (const auto& s : LegacyCallsThrough(v1alpha1_, kubelet_ + "/abs-out", kubelet_)) {
    EXPECT_EQ(s.error_code(), Code::PERMISSION_DENIED) << s.error_message();
  }
  EXPECT_EQ(OutsideState(), before);
  EXPECT_FALSE(Lexists(kubelet_ + "/via-link"));
}

TEST_F(FilesystemEndToEnd, RelativeLinkClimbingOutLetsNothingThroughOnV1beta1) {
  fs::create_symlink("../outside", kubelet_ + "/rel-out");
  auto before = OutsideState();
  for (const auto& s : LegacyCallsThrough(v1beta1_, kubelet_ + "/rel-out", kubelet_)) {
    EXPECT_EQ(s.error_code(), Code::PERMISSION_DENIED) << s.error_message();
  }
  EXPECT_EQ(OutsideState(), before);
  EXPECT_FALSE(Lexists(kubelet_ + "/via-link"));
}

TEST_F(FilesystemEndToEnd, StringPrefixSiblingIsRefusedOnV1beta2) {
  auto before = OutsideState();
  const std::string victim = evil_ + "/victim.txt";
  std::vector<grpc::Status> results = {
      v1beta2_.PathExists(victim).first,
      v1beta2_.Mkdir(evil_ + "/new"),
      v1beta2_.Rmdir(evil_, true),
      v1beta2_.CreateSymlink(victim, kubelet_ + "/link"),
      v1beta2_.CreateSymlink(kubelet_, evil_ + "/link"),
      v1beta2_.IsSymlink(victim).first,
  };
  for (const auto& s : results) {
    EXPECT_EQ(s.error_code(), Code::PERMISSION_DENIED) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr(Roots()));
  }
  EXPECT_EQ(OutsideState(), before);
  EXPECT_FALSE(Lexists(kubelet_ + "/link"));
}

// A red-team pass sent 15 MiB paths: each error quoted the whole path, and 32 calls took the host to 1.46 GB and
// wrote 500 MB of log. Errors and log lines quote a bounded prefix of any request value and say how long it was.
TEST_F(FilesystemEndToEnd, MultiMebibytePathGetsABoundedErrorAndLogLine) {
  const size_t kHuge = 12 * 1024 * 1024;
  const std::string long_name = kubelet_ + "/" + std::string(kHuge, 'a');  // one component longer than 255 bytes
  std::string climbing = kubelet_;
  while (climbing.size() < kHuge) climbing += "/d";
  climbing += "/..";  // a '..' component after megabytes of path
  const std::string relative = std::string(kHuge, 'r');
  const std::string with_nul = kubelet_ + "/" + std::string(kHuge, 'n') + std::string(1, '\0');
  const size_t log_before = host_.log().size();
  std::vector<grpc::Status> results = {
      v1_.PathExists(long_name).first,
      v1_.Mkdir(climbing),
      v1_.Rmdir(relative, true),
      v1_.IsSymlink(with_nul).first,
      v1_.CreateSymlink(kubelet_, long_name),
      v1_.CreateSymlink(climbing, kubelet_ + "/link"),
      v2_.RmdirContents(long_name),
      v1beta2_.Mkdir(relative),
  };
  for (const auto& s : results) {
    EXPECT_EQ(s.error_code(), Code::INVALID_ARGUMENT) << s.error_message().substr(0, 2048);
    EXPECT_LT(s.error_message().size(), 2048u) << s.error_message().substr(0, 2048);
    EXPECT_THAT(s.error_message(), HasSubstr(" bytes)"));  // says how long the value was
  }
  EXPECT_LT(host_.log().size() - log_before, 64u * 1024u);
  EXPECT_FALSE(Lexists(kubelet_ + "/d"));
  EXPECT_FALSE(Lexists(kubelet_ + "/link"));
}

TEST_F(FilesystemEndToEnd, RmdirContentsIsServedOnV2alpha1Only) {
  fs::create_directories(kubelet_ + "/d");
  EXPECT_EQ(v1_.RmdirContents(kubelet_ + "/d").error_code(), Code::UNIMPLEMENTED);
  EXPECT_TRUE(v2_.RmdirContents(kubelet_ + "/d").ok());
}

TEST_F(FilesystemEndToEnd, MkdirOfAnExistingDirectorySucceedsAndOverAFileFails) {
  fs::create_directories(kubelet_ + "/exists");
  WriteFile(kubelet_ + "/file", "f");
  EXPECT_TRUE(v1_.Mkdir(kubelet_ + "/exists").ok());
  EXPECT_EQ(v1_.Mkdir(kubelet_ + "/file").error_code(), Code::FAILED_PRECONDITION);
  EXPECT_EQ(ReadFile(kubelet_ + "/file"), "f");
}

TEST_F(FilesystemEndToEnd, CreateSymlinkFailsWhenTheLinkExists) {
  fs::create_directories(kubelet_ + "/stage");
  ASSERT_TRUE(v1_.CreateSymlink(kubelet_ + "/stage", kubelet_ + "/link").ok());
  EXPECT_EQ(v1_.CreateSymlink(kubelet_ + "/stage", kubelet_ + "/link").error_code(), Code::ALREADY_EXISTS);
}

TEST_F(FilesystemEndToEnd, RmdirOfAMissingPathFailsUnlessForced) {
  EXPECT_EQ(v1_.Rmdir(kubelet_ + "/missing", false).error_code(), Code::NOT_FOUND);
  EXPECT_TRUE(v1_.Rmdir(kubelet_ + "/missing", true).ok());
}

// ---- IsSymlink: every upstream case, plus mount points and links leading outside ----

TEST_F(FilesystemEndToEnd, IsSymlinkOfAMissingPathIsAnError) {
  EXPECT_EQ(v1_.IsSymlink(kubelet_ + "/missing").first.error_code(), Code::NOT_FOUND);
}

TEST_F(FilesystemEndToEnd, IsSymlinkOfAPlainDirectoryIsFalse) {
  fs::create_directories(kubelet_ + "/plain");
  auto r = v1_.IsSymlink(kubelet_ + "/plain");
  ASSERT_TRUE(r.first.ok());
  EXPECT_FALSE(r.second);
}

TEST_F(FilesystemEndToEnd, IsSymlinkOfALinkToAnExistingDirectoryIsTrueAndFalseOnceTheTargetIsDeleted) {
  fs::create_directories(kubelet_ + "/target");
  ASSERT_TRUE(v1_.CreateSymlink(kubelet_ + "/target", kubelet_ + "/link").ok());
  auto before = v1_.IsSymlink(kubelet_ + "/link");
  ASSERT_TRUE(before.first.ok());
  EXPECT_TRUE(before.second);
  ASSERT_TRUE(v1_.Rmdir(kubelet_ + "/target", false).ok());
  auto after = v1_.IsSymlink(kubelet_ + "/link");
  ASSERT_TRUE(after.first.ok());
  EXPECT_FALSE(after.second);
}

TEST_F(FilesystemEndToEnd, IsSymlinkOfAMountPointIsTrue) {
  fs::create_directories(kubelet_ + "/mnt");
  auto mount = TestMount::Tmpfs(kubelet_ + "/mnt");
  if (!mount.ok()) GTEST_SKIP() << mount.error();
  auto r = v1_.IsSymlink(kubelet_ + "/mnt");
  ASSERT_TRUE(r.first.ok());
  EXPECT_TRUE(r.second);
}

TEST_F(FilesystemEndToEnd, IsSymlinkOfALinkLeadingOutsideIsRefused) {
  fs::create_symlink(outside_ + "/secret.txt", kubelet_ + "/to-secret");
  auto r = v1_.IsSymlink(kubelet_ + "/to-secret");
  EXPECT_EQ(r.first.error_code(), Code::PERMISSION_DENIED);
  EXPECT_THAT(r.first.error_message(), HasSubstr(Roots()));
}

// ---- RmdirContents ----

TEST_F(FilesystemEndToEnd, RmdirContentsLeavesAnEmptyRoot) {
  WriteFile(kubelet_ + "/tree/a/b/c.txt", "c");
  WriteFile(kubelet_ + "/tree/d.txt", "d");
  fs::create_directories(kubelet_ + "/tree/e/f/g");
  ASSERT_TRUE(v2_.RmdirContents(kubelet_ + "/tree").ok());
  EXPECT_TRUE(IsDirNoFollow(kubelet_ + "/tree"));
  EXPECT_TRUE(fs::is_empty(kubelet_ + "/tree"));
}

TEST_F(FilesystemEndToEnd, RmdirContentsRemovesALinkToAnOutsideFileAndKeepsTheFile) {
  fs::create_directories(kubelet_ + "/tree");
  fs::create_symlink(outside_ + "/secret.txt", kubelet_ + "/tree/link");
  auto before = OutsideState();
  ASSERT_TRUE(v2_.RmdirContents(kubelet_ + "/tree").ok());
  EXPECT_TRUE(fs::is_empty(kubelet_ + "/tree"));
  EXPECT_EQ(OutsideState(), before);
}

// ---- escapes ----

TEST_F(FilesystemEndToEnd, StringPrefixSiblingIsRefusedWithAMessageNamingPathAndRoots) {
  auto before = OutsideState();
  const std::string victim = evil_ + "/victim.txt";
  std::vector<grpc::Status> results = {
      v2_.PathExists(victim).first,
      v2_.Mkdir(evil_ + "/new"),
      v2_.Rmdir(victim, false),
      v2_.Rmdir(evil_, true),
      v2_.RmdirContents(evil_),
      v2_.IsSymlink(victim).first,
      v2_.CreateSymlink(victim, kubelet_ + "/link"),
      v2_.CreateSymlink(kubelet_, evil_ + "/link"),
  };
  for (const auto& s : results) {
    EXPECT_EQ(s.error_code(), Code::PERMISSION_DENIED) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr(evil_));
    EXPECT_THAT(s.error_message(), HasSubstr(Roots()));
  }
  EXPECT_EQ(OutsideState(), before);
  EXPECT_FALSE(Lexists(kubelet_ + "/link"));
}

TEST_F(FilesystemEndToEnd, DotDotComponentsAreInvalid) {
  auto before = OutsideState();
  const std::string up = kubelet_ + "/../outside";
  std::vector<grpc::Status> results = {
      v2_.PathExists(up + "/secret.txt").first,
      v2_.Mkdir(up + "/new"),
      v2_.Rmdir(up + "/dir", true),
      v2_.RmdirContents(up),
      v2_.IsSymlink(up).first,
      v2_.CreateSymlink(up, kubelet_ + "/l"),
      v2_.CreateSymlink(kubelet_, up + "/l"),
  };
  for (const auto& s : results) {
    EXPECT_EQ(s.error_code(), Code::INVALID_ARGUMENT) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("'..'"));
  }
  EXPECT_EQ(OutsideState(), before);
}

TEST_F(FilesystemEndToEnd, SymlinksPointingOutsideLetNothingThrough) {
  fs::create_symlink(outside_, kubelet_ + "/abs-out");      // absolute
  fs::create_symlink("../outside", kubelet_ + "/rel-out");  // relative, climbing above the root
  auto before = OutsideState();
  for (const std::string& link : {kubelet_ + "/abs-out", kubelet_ + "/rel-out"}) {
    SCOPED_TRACE(link);
    std::vector<grpc::Status> results = {
        v2_.PathExists(link + "/secret.txt").first,
        v2_.PathExists(link + "/no-such-file").first,
        v2_.Mkdir(link + "/created/below"),
        v2_.Rmdir(link + "/secret.txt", false),
        v2_.Rmdir(link + "/dir", true),
        v2_.RmdirContents(link + "/dir"),
        v2_.RmdirContents(link),
        v2_.IsSymlink(link + "/dir").first,
        v2_.CreateSymlink(kubelet_, link + "/planted"),
        v2_.CreateSymlink(link + "/secret.txt", kubelet_ + "/via-link"),
    };
    for (const auto& s : results) EXPECT_EQ(s.error_code(), Code::PERMISSION_DENIED) << s.error_message();
  }
  EXPECT_EQ(OutsideState(), before);
  EXPECT_FALSE(Lexists(kubelet_ + "/via-link"));
}

TEST_F(FilesystemEndToEnd, SymlinkAsTheLastComponentIsRemovedButNeverFollowedOutside) {
  fs::create_symlink(outside_ + "/dir", kubelet_ + "/last");
  auto before = OutsideState();
  EXPECT_EQ(v2_.Mkdir(kubelet_ + "/last").error_code(), Code::PERMISSION_DENIED);
  EXPECT_EQ(v2_.RmdirContents(kubelet_ + "/last").error_code(), Code::PERMISSION_DENIED);
  EXPECT_EQ(v2_.CreateSymlink(kubelet_, kubelet_ + "/last").error_code(), Code::ALREADY_EXISTS);
  EXPECT_EQ(OutsideState(), before);

  ASSERT_TRUE(v2_.Rmdir(kubelet_ + "/last", true).ok());
  EXPECT_FALSE(Lexists(kubelet_ + "/last"));
  EXPECT_EQ(OutsideState(), before);
}

TEST_F(FilesystemEndToEnd, MountedVolumeBelowARemovedPodDirectoryKeepsItsData) {
  const std::string pod = kubelet_ + "/pods/pod-1";
  const std::string mount_point = pod + "/volumes/kubernetes.io~csi/pvc-1/mount";
  fs::create_directories(mount_point);
  WriteFile(pod + "/etc-hosts", "127.0.0.1 localhost");
  auto volume = TestMount::Tmpfs(mount_point);
  if (!volume.ok()) GTEST_SKIP() << volume.error();
  WriteFile(mount_point + "/volume-data.txt", "precious");
  fs::create_directories(mount_point + "/nested/deeper");
  auto volume_before = Snapshot(mount_point);

  auto forced = v2_.Rmdir(pod, true);
  EXPECT_EQ(forced.error_code(), Code::FAILED_PRECONDITION);
  EXPECT_THAT(forced.error_message(), HasSubstr("not removed: \"" + mount_point + "\" is a mount point"));
  EXPECT_EQ(Snapshot(mount_point), volume_before);
  EXPECT_FALSE(Lexists(pod + "/etc-hosts"));

  auto contents = v2_.RmdirContents(pod);
  EXPECT_EQ(contents.error_code(), Code::FAILED_PRECONDITION);
  EXPECT_EQ(Snapshot(mount_point), volume_before);

  auto itself = v2_.Rmdir(mount_point, true);
  EXPECT_EQ(itself.error_code(), Code::FAILED_PRECONDITION);
  EXPECT_EQ(Snapshot(mount_point), volume_before);
}

TEST_F(FilesystemEndToEnd, BindMountedOutsideDirectoryBelowARemovedDirectoryIsNotEntered) {
  fs::create_directories(kubelet_ + "/pods/pod-2/bind");
  auto bind = TestMount::Bind(outside_ + "/dir", kubelet_ + "/pods/pod-2/bind");
  if (!bind.ok()) GTEST_SKIP() << bind.error();
  auto before = OutsideState();
  EXPECT_EQ(v2_.Rmdir(kubelet_ + "/pods/pod-2", true).error_code(), Code::FAILED_PRECONDITION);
  EXPECT_EQ(OutsideState(), before);
}

// ---- malformed requests ----

TEST_F(FilesystemEndToEnd, MalformedRequestBytesAreInvalidAndTheHostKeepsServing) {
  auto channel = Dial(host_.endpoint(kV2alpha1));
  const std::string garbage[] = {std::string("\xff\xff\xff\xff", 4), std::string("\x0a\x80", 2),
                                 std::string("\x0a\x05"
                                             "ab",
                                             4),
                                 std::string("\x12\xff\xff\xff\xff\x0f", 6)};
  for (const char* method : {"PathExists", "Mkdir", "Rmdir", "CreateSymlink", "IsSymlink", "RmdirContents"}) {
    for (const auto& bytes : garbage) {
      std::string out;
      auto s = CallRaw(channel, std::string("/v2alpha1.Filesystem/") + method, bytes, &out);
      EXPECT_EQ(s.error_code(), Code::INVALID_ARGUMENT) << method << ": " << s.error_message();
    }
  }
  EXPECT_TRUE(host_.running());
  fs::create_directories(kubelet_ + "/still-served");
  EXPECT_TRUE(v1_.PathExists(kubelet_ + "/still-served").second);
}

TEST_F(FilesystemEndToEnd, MissingFieldsAreInvalid) {
  auto channel = Dial(host_.endpoint(kV2alpha1));
  for (const char* method : {"PathExists", "Mkdir", "Rmdir", "CreateSymlink", "IsSymlink", "RmdirContents"}) {
    std::string out;
    auto s = CallRaw(channel, std::string("/v2alpha1.Filesystem/") + method, "", &out);
    EXPECT_EQ(s.error_code(), Code::INVALID_ARGUMENT) << method << ": " << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("empty"));
  }
  EXPECT_EQ(v1_.CreateSymlink(kubelet_, "").error_code(), Code::INVALID_ARGUMENT);
  EXPECT_EQ(v1_.CreateSymlink("", kubelet_ + "/l").error_code(), Code::INVALID_ARGUMENT);
  EXPECT_TRUE(host_.running());
}

// ---- many clients at once ----

TEST_F(FilesystemEndToEnd, ParallelClientsEachGetTheirOwnTreeRight) {
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      Client<V1> client(Dial(host_.endpoint(kV1)));
      for (int i = 0; i < 20; ++i) {
        std::string stage = kubelet_ + "/plugins/p" + std::to_string(t) + "/stage" + std::to_string(i);
        std::string pod = kubelet_ + "/pods/p" + std::to_string(t) + "/vol" + std::to_string(i);
        bool ok = client.Mkdir(stage).ok() && client.Mkdir(pod).ok() &&
                  client.CreateSymlink(stage, pod + "/rootvol").ok() && client.IsSymlink(pod + "/rootvol").second &&
                  client.Rmdir(pod, true).ok() && client.PathExists(stage).second && client.Rmdir(stage, true).ok();
        if (!ok) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

// ---- configuration ----

TEST(FilesystemGroupConfig, SlashAsKubeletPathRefusesTheGroupWithAClearReason) {
  HostProcess host("[groups.filesystem]\nenabled = true\nrequired = true\n", "kubelet_path = \"/\"\n");
  EXPECT_FALSE(host.Start({kV1}, std::chrono::seconds(10)));
  EXPECT_THAT(host.error(), HasSubstr("refusing \"/\" as an allowed root"));
}

TEST(FilesystemGroupConfig, UnknownGroupKeyRefusesTheGroup) {
  HostProcess host("[groups.filesystem]\nenabled = true\nrequired = true\nlink_target_dir = [\"/x\"]\n");
  EXPECT_FALSE(host.Start({kV1}, std::chrono::seconds(10)));
  EXPECT_THAT(host.error(), HasSubstr("unknown key 'link_target_dir'"));
}

// The SMB group's local_path links point into <state_dir>/smb; by default the filesystem group may follow them
// to look (IsSymlink, CreateSymlink's source), never to change anything there.
TEST_F(FilesystemEndToEnd, SmbStagedPathIsASymlinkAndCanBePublishedByDefault) {
  const std::string share = host_.dir() + "/state/smb/server/share";
  WriteFile(share + "/file.txt", "remote data");
  const std::string staging = kubelet_ + "/staging";
  const std::string publish = kubelet_ + "/pods/p/mount";
  fs::create_directories(kubelet_ + "/pods/p");
  fs::create_symlink(share, staging);

  auto is_link = v1_.IsSymlink(staging);
  ASSERT_TRUE(is_link.first.ok()) << is_link.first.error_message();
  EXPECT_TRUE(is_link.second);
  ASSERT_TRUE(v1_.CreateSymlink(staging, publish).ok());
  EXPECT_TRUE(v1_.IsSymlink(publish).second);
  EXPECT_EQ(v1_.Mkdir(publish + "/new").error_code(), Code::PERMISSION_DENIED);
  ASSERT_TRUE(v1_.Rmdir(publish, true).ok());
  EXPECT_EQ(ReadFile(share + "/file.txt"), "remote data");
}

TEST(FilesystemGroupConfig, EmptyLinkTargetDirsFollowNoLinkOutOfTheRoots) {
  TempDir sandbox;
  const std::string kubelet = sandbox.Sub("kubelet");
  fs::create_directories(kubelet);
  HostProcess host("[groups.filesystem]\nrequired = true\nlink_target_dirs = []\n",
                   "kubelet_path = \"" + kubelet + "\"\n");
  ASSERT_TRUE(host.Start({kV1})) << host.error();
  WriteFile(host.dir() + "/state/smb/server/share/f", "x");
  fs::create_symlink(host.dir() + "/state/smb/server/share", kubelet + "/staging");
  Client<V1> client(Dial(host.endpoint(kV1)));
  EXPECT_EQ(client.IsSymlink(kubelet + "/staging").first.error_code(), Code::PERMISSION_DENIED);
}

}  // namespace
}  // namespace csi_proxy::filesystem

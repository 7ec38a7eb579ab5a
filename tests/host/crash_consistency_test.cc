// kill -9 of the real host while clients change the node through it, several times at random moments, then a
// restart: the state the groups keep is whole (iSCSI portals and mutual CHAP secret: each file the old or the new
// version, mode 0600, no temporary left after the start), what the filesystem group did is complete or absent
// (a directory tree, a symlink that names its whole target), and the restarted host serves at once.
// The SMB group keeps no state file (its mappings are the kernel's mounts); it is not part of this test.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "grpc_client.h"
#include "host_process.h"
#include "v1/filesystem.pb.h"
#include "v1alpha2/iscsi.pb.h"

namespace csi_proxy::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr const char* kFilesystem = "csi-proxy-filesystem-v1";
constexpr const char* kIscsi = "csi-proxy-iscsi-v1alpha2";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

unsigned ModeOf(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0 ? st.st_mode & 07777 : 0;
}

// What the clients asked for, so that a state seen after a crash can be told apart from a torn one.
struct Requested {
  std::mutex mu;
  std::set<std::string> secrets;
  std::set<std::string> portals;    // "address port"
  std::atomic<int> answered{0};     // mutating calls that succeeded, so the test is known to have done something
  std::atomic<int> temporaries{0};  // temporaries found after kills, i.e. writes a kill interrupted
};

v1alpha2::TargetPortal Portal(int i) {
  v1alpha2::TargetPortal p;
  p.set_target_address("10.1." + std::to_string(i / 250) + "." + std::to_string(i % 250 + 1));
  p.set_target_port(3260);
  return p;
}

// Changes the iSCSI state as fast as the host takes it until `stop`: portals added and removed, the secret set.
void IscsiClient(const std::string& endpoint, int seed, Requested* requested, const std::atomic<bool>* stop) {
  auto channel = Dial(endpoint);
  std::mt19937 rng(seed);
  for (int i = 0; !stop->load(); ++i) {
    int n = static_cast<int>(rng() % 40);
    v1alpha2::TargetPortal portal = Portal(n);
    {
      std::lock_guard lock(requested->mu);
      requested->portals.insert(portal.target_address() + " 3260");
    }
    if (i % 3 == 2) {
      v1alpha2::SetMutualChapSecretRequest req;
      std::string secret = "secret-" + std::to_string(seed) + "-" + std::to_string(i) + std::string(rng() % 8, 'x');
      {
        std::lock_guard lock(requested->mu);
        requested->secrets.insert(secret);
      }
      req.set_mutualchapsecret(secret);
      v1alpha2::SetMutualChapSecretResponse resp;
      if (Call(channel, "/v1alpha2.Iscsi/SetMutualChapSecret", req, &resp, milliseconds(500)).ok()) {
        ++requested->answered;
      }
    } else if (rng() % 2 == 0) {
      v1alpha2::AddTargetPortalRequest req;
      *req.mutable_target_portal() = portal;
      v1alpha2::AddTargetPortalResponse resp;
      if (Call(channel, "/v1alpha2.Iscsi/AddTargetPortal", req, &resp, milliseconds(500)).ok()) ++requested->answered;
    } else {
      v1alpha2::RemoveTargetPortalRequest req;
      *req.mutable_target_portal() = portal;
      v1alpha2::RemoveTargetPortalResponse resp;
      Call(channel, "/v1alpha2.Iscsi/RemoveTargetPortal", req, &resp, milliseconds(500));
    }
  }
}

// Builds and tears down directory trees with a symlink into each, under `root` (inside the kubelet directory).
void FilesystemClient(const std::string& endpoint, const std::string& root, int seed, std::atomic<int>* answered,
                      const std::atomic<bool>* stop) {
  auto channel = Dial(endpoint);
  for (int i = 0; !stop->load(); ++i) {
    std::string tree = root + "/c" + std::to_string(seed) + "-" + std::to_string(i % 8);
    v1::MkdirRequest mkdir;
    mkdir.set_path(tree + "/a/b/c");
    v1::MkdirResponse mkdir_resp;
    Call(channel, "/v1.Filesystem/Mkdir", mkdir, &mkdir_resp, milliseconds(500));
    v1::CreateSymlinkRequest link;
    link.set_source_path(tree + "/a/b/c");
    link.set_target_path(tree + "/link");
    v1::CreateSymlinkResponse link_resp;
    if (Call(channel, "/v1.Filesystem/CreateSymlink", link, &link_resp, milliseconds(500)).ok()) ++*answered;
    v1::RmdirRequest rmdir;
    rmdir.set_path(tree + "/link");  // the link first, then the tree
    v1::RmdirResponse rmdir_resp;
    Call(channel, "/v1.Filesystem/Rmdir", rmdir, &rmdir_resp, milliseconds(500));
    rmdir.set_path(tree);
    rmdir.set_force(true);
    Call(channel, "/v1.Filesystem/Rmdir", rmdir, &rmdir_resp, milliseconds(500));
  }
}

// The iSCSI state directory after a crash: at most the two state files, each whole, plus temporaries that the
// next start must remove.
void ExpectWholeIscsiState(const std::string& dir, Requested& requested) {
  std::lock_guard lock(requested.mu);
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string name = e.path().filename();
    if (name == "portals") {
      EXPECT_EQ(ModeOf(e.path()), 0600u);
      std::istringstream lines(ReadAll(e.path()));
      std::string line;
      bool header = true;
      while (std::getline(lines, line)) {
        if (header) {
          EXPECT_EQ(line.rfind("# csi-proxy iSCSI target portals", 0), 0u) << line;
          header = false;
          continue;
        }
        EXPECT_TRUE(requested.portals.count(line)) << "a torn or unknown portal line: '" << line << "'";
      }
      EXPECT_FALSE(header) << "an empty portals file";
    } else if (name == "mutual-chap-secret") {
      EXPECT_EQ(ModeOf(e.path()), 0600u);
      EXPECT_TRUE(requested.secrets.count(ReadAll(e.path()))) << "a torn secret: '" << ReadAll(e.path()) << "'";
    } else {
      EXPECT_EQ(name.rfind(".", 0), 0u) << "unexpected file " << name;
      EXPECT_NE(name.find(".tmp."), std::string::npos) << "unexpected file " << name;
      ++requested.temporaries;
    }
  }
}

// Every tree a filesystem client builds holds nothing but a/b/c and `link` -> its a/b/c: whatever a kill
// interrupted is either there whole or not at all.
void ExpectWholeTrees(const std::string& root) {
  if (!fs::exists(root)) return;
  for (const auto& tree : fs::directory_iterator(root)) {
    ASSERT_TRUE(fs::is_directory(fs::symlink_status(tree.path()))) << tree.path();
    for (const auto& e : fs::recursive_directory_iterator(tree.path())) {
      std::string rel = e.path().lexically_relative(tree.path());
      auto st = fs::symlink_status(e.path());
      if (rel == "link") {
        ASSERT_TRUE(fs::is_symlink(st)) << e.path();
        EXPECT_EQ(fs::read_symlink(e.path()), tree.path() / "a/b/c") << e.path();
      } else {
        EXPECT_TRUE(rel == "a" || rel == "a/b" || rel == "a/b/c") << "unexpected " << e.path();
        EXPECT_TRUE(fs::is_directory(st)) << e.path();
      }
    }
  }
}

// Starts the host and returns the time from its exec to the first answered call on each of the two endpoints.
milliseconds StartAndTimeFirstCalls(HostProcess& host) {
  auto begin = Clock::now();
  EXPECT_TRUE(host.Start({})) << host.error();
  bool fs_ok = false;
  bool iscsi_ok = false;
  while ((!fs_ok || !iscsi_ok) && Clock::now() - begin < std::chrono::seconds(20) && host.running()) {
    // Dial only once the socket is there: a channel that failed to connect backs off for a second.
    if (!fs_ok && SocketAccepts(host.endpoint(kFilesystem))) {
      v1::PathExistsRequest req;
      req.set_path(host.kubelet_dir());
      v1::PathExistsResponse resp;
      fs_ok = Call(Dial(host.endpoint(kFilesystem)), "/v1.Filesystem/PathExists", req, &resp, milliseconds(500)).ok();
    }
    if (!iscsi_ok && SocketAccepts(host.endpoint(kIscsi))) {
      v1alpha2::ListTargetPortalsResponse resp;
      iscsi_ok = Call(Dial(host.endpoint(kIscsi)), "/v1alpha2.Iscsi/ListTargetPortals",
                      v1alpha2::ListTargetPortalsRequest(), &resp, milliseconds(500))
                     .ok();
    }
    if (!fs_ok || !iscsi_ok) std::this_thread::sleep_for(milliseconds(1));
  }
  EXPECT_TRUE(fs_ok && iscsi_ok) << host.log();
  return std::chrono::duration_cast<milliseconds>(Clock::now() - begin);
}

TEST(CrashConsistency, KillDuringMutatingCallsLeavesWholeStateAndTheHostServesAtOnce) {
  HostProcess host(
      "[groups.filesystem]\nrequired = true\n"
      "[groups.iscsi]\nrequired = true\ninitiator_name = \"iqn.2024-01.io.k8s.csi-proxy.test:crash\"\n");
  const std::string state = host.dir() + "/state/iscsi";
  const std::string root = host.kubelet_dir() + "/crash";
  fs::create_directories(root);
  Requested requested;
  std::atomic<int> links{0};
  std::mt19937 rng(std::random_device{}());
  std::vector<milliseconds> starts;
  constexpr int kRounds = 8;
  for (int round = 0; round < kRounds; ++round) {
    starts.push_back(StartAndTimeFirstCalls(host));
    ASSERT_TRUE(host.running()) << host.log();
    // Whatever the previous kill left is whole, and no temporary survived the start.
    ExpectWholeIscsiState(state, requested);
    for (const auto& e : fs::directory_iterator(state)) {
      EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path() << " survived a start";
    }
    ExpectWholeTrees(root);
    // The host's view matches the files.
    v1alpha2::ListTargetPortalsResponse listed;
    ASSERT_TRUE(Call(Dial(host.endpoint(kIscsi)), "/v1alpha2.Iscsi/ListTargetPortals",
                     v1alpha2::ListTargetPortalsRequest(), &listed)
                    .ok());
    size_t lines = 0;
    if (fs::exists(state + "/portals")) {
      std::string text = ReadAll(state + "/portals");
      lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) - 1;
    }
    EXPECT_EQ(static_cast<size_t>(listed.target_portals_size()), lines);

    std::atomic<bool> stop{false};
    std::vector<std::thread> clients;
    for (int c = 0; c < 2; ++c) {
      clients.emplace_back(IscsiClient, host.endpoint(kIscsi), round * 10 + c, &requested, &stop);
      clients.emplace_back(FilesystemClient, host.endpoint(kFilesystem), root, round * 10 + c, &links, &stop);
    }
    std::this_thread::sleep_for(milliseconds(50 + rng() % 400));
    host.Kill();
    stop = true;
    for (auto& t : clients) t.join();
    ExpectWholeIscsiState(state, requested);
    ExpectWholeTrees(root);
  }
  // One more start after the last kill, then a clean stop.
  starts.push_back(StartAndTimeFirstCalls(host));
  ExpectWholeIscsiState(state, requested);
  EXPECT_EQ(host.Stop(), 0);

  std::vector<milliseconds> sorted = starts;
  std::sort(sorted.begin(), sorted.end());
  std::ostringstream figures;
  for (auto s : starts) figures << s.count() << " ";
  std::cout << "exec to the first answered call on both endpoints, ms: " << figures.str() << "(median "
            << sorted[sorted.size() / 2].count() << ")\n"
            << "iSCSI state changes answered: " << requested.answered << ", symlinks created: " << links
            << ", temporaries found after kills (writes interrupted): " << requested.temporaries << "\n";
  EXPECT_GT(requested.answered, 0);
  EXPECT_GT(links, 0);
  ::testing::Test::RecordProperty("start_to_first_call_ms", figures.str());
  // The target is 100 ms; the bound leaves room for a loaded 2-core machine and sanitizer builds.
  EXPECT_LT(sorted[sorted.size() / 2], milliseconds(1000)) << figures.str();
  EXPECT_LT(sorted.back(), milliseconds(3000)) << figures.str();
}

}  // namespace
}  // namespace csi_proxy::testing

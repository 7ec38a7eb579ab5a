// The soak: 64 concurrent clients call a mix of every group's read-only methods and safe mutating ones (Mkdir and
// Rmdir of scratch paths, removing an SMB mapping that does not exist) through the real host and its Unix
// sockets, on a scratch kubelet tree and a loop device when the machine allows one. It fails when any call
// answers other than expected, when the host's descriptor count or resident memory grows after warm-up beyond
// the bounds below, or when a file, mount or loop device is left behind.
//
//   bench_soak [--short] [--calls N] [--clients N]
//
// Default: 100000 call slots; --short (CI): 60000. Expected answers: the filesystem calls must succeed; every other
// method must answer, on every call, the code it answered on its first call (the machine decides whether e.g.
// a BIOS serial exists, load must not change it).
#include <sys/mount.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench_host.h"
#include "loop_devices.h"
#include "raw_client.h"
#include "temp_dir.h"

namespace csi_proxy::bench {
using namespace ::csi_proxy::testing;  // the support library shared with the tests (tests/support)
namespace {

namespace fs = std::filesystem;

// Growth allowed between the end of warm-up and the end of the run.
constexpr long kMaxFdGrowth = 8;
constexpr long kMaxRssGrowthKiB = 16 * 1024;

std::string Varint(uint64_t n) {
  std::string out;
  do {
    uint8_t b = n & 0x7F;
    n >>= 7;
    out.push_back(static_cast<char>(b | (n ? 0x80 : 0)));
  } while (n);
  return out;
}
std::string StringField(int number, const std::string& value) {
  return Varint(static_cast<uint64_t>(number) << 3 | 2) + Varint(value.size()) + value;
}
std::string IntField(int number, uint64_t value) { return Varint(static_cast<uint64_t>(number) << 3) + Varint(value); }

struct Case {
  std::string group;
  std::string endpoint;
  std::string method;
  std::string request;
  bool must_succeed = false;
};

long FdCount(pid_t pid) {
  long n = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) ++n;
  return n;
}

long RssKiB(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

bool MountedBelow(const std::string& dir) {
  std::ifstream mounts("/proc/self/mountinfo");
  std::string line;
  while (std::getline(mounts, line)) {
    if (line.find(" " + dir) != std::string::npos) return true;
  }
  return false;
}

int Run(int argc, char** argv) {
  long calls = 100000;
  int clients = 64;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--short") {
      calls = 60000;
    } else if (arg == "--calls" && i + 1 < argc) {
      calls = std::stol(argv[++i]);
    } else if (arg == "--clients" && i + 1 < argc) {
      clients = std::stoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: bench_soak [--short] [--calls N] [--clients N]\n");
      return 2;
    }
  }

  std::vector<std::string> groups;
  for (const auto& group : AllGroups()) {
    if (!GroupLibrary(group).empty()) groups.push_back(group);
  }
  TempDir scratch("csi-proxy-soak");
  std::unique_ptr<LoopDevice> loop;
  uint64_t disk_number = 0;
  if (std::string why = LoopDevicesUnavailableReason(); why.empty()) {
    auto attached = LoopDevice::Attach(scratch.Sub("disk.img"), 64 << 20);
    if (!attached.ok()) {
      std::fprintf(stderr, "soak: cannot attach a loop device: %s\n", attached.status().message().c_str());
      return 1;
    }
    loop = std::move(attached).value();
    disk_number = loop->DiskNumber();
    std::printf("soak: loop device %s (disk %llu)\n", loop->path().c_str(),
                static_cast<unsigned long long>(disk_number));
  } else {
    std::printf("soak: no loop device (%s); disk and volume calls use disk 0\n", why.c_str());
  }

  // Groups whose init fails on this machine (no cifs, no iscsid) are skipped by the host, not required.
  std::string extra;
  for (const auto& group : groups) extra += "[groups." + group + "]\nenabled = true\nrequired = false\n";
  BenchHost host({}, "", extra);
  auto started = host.Start({"csi-proxy-filesystem-v1"});
  if (!started.ok()) {
    std::fprintf(stderr, "soak: the host did not start: %s\n%s\n", started.status().message().c_str(),
                 host.log().c_str());
    return 1;
  }
  const std::string kubelet = host.kubelet_dir();
  fs::create_directories(kubelet + "/soak/existing");

  std::vector<Case> cases = {
      {"filesystem", "csi-proxy-filesystem-v1", "/v1.Filesystem/PathExists", StringField(1, kubelet + "/soak/existing"),
       true},
      {"filesystem", "csi-proxy-filesystem-v1", "/v1.Filesystem/PathExists", StringField(1, kubelet + "/soak/missing"),
       true},
      {"filesystem", "csi-proxy-filesystem-v1", "/v1.Filesystem/IsSymlink", StringField(1, kubelet + "/soak/existing"),
       true},
      {"system", "csi-proxy-system-v1alpha1", "/v1alpha1.System/GetBIOSSerialNumber", ""},
      {"system", "csi-proxy-system-v1alpha1", "/v1alpha1.System/GetService", StringField(1, "csi-proxy-soak-absent")},
      {"disk", "csi-proxy-disk-v1", "/v1.Disk/ListDiskLocations", ""},
      {"disk", "csi-proxy-disk-v1", "/v1.Disk/ListDiskIDs", ""},
      {"disk", "csi-proxy-disk-v1", "/v1.Disk/GetDiskStats", IntField(1, disk_number)},
      {"volume", "csi-proxy-volume-v1", "/v1.Volume/ListVolumesOnDisk", IntField(1, disk_number)},
      {"iscsi", "csi-proxy-iscsi-v1alpha2", "/v1alpha2.Iscsi/ListTargetPortals", ""},
      {"smb", "csi-proxy-smb-v1", "/v1.Smb/RemoveSmbGlobalMapping", StringField(1, "\\\\soak.invalid\\share")},
  };
  std::erase_if(cases, [&](const Case& c) {
    bool serves = ServerAnswers(host.endpoint(c.endpoint));
    if (!serves)
      std::printf("soak: %s is not served here (group skipped at init); its calls are left out\n", c.endpoint.c_str());
    return !serves;
  });

  std::mutex mutex;
  std::map<std::string, int> first_code;  // method -> the code of its first call
  std::map<std::string, long> unexpected;
  std::atomic<long> next{0}, done{0}, rpcs{0};
  const long warmup = calls / 10;
  long fd_warm = 0, rss_warm = 0;
  std::atomic<bool> measured{false};

  auto record = [&](const Case& c, const grpc::Status& status) {
    rpcs.fetch_add(1);
    std::lock_guard lock(mutex);
    int code = status.error_code();
    auto [it, inserted] = first_code.emplace(c.method, code);
    bool ok = c.must_succeed ? code == 0 : code == it->second;
    if (!ok && unexpected[c.method]++ < 3) {
      std::fprintf(stderr, "soak: %s answered %d (%s)\n", c.method.c_str(), code, status.error_message().c_str());
    }
  };

  // The final reading is taken when every client has finished but still holds its connections, so that it
  // compares like with like against the warm-up reading.
  long fd_end = 0, rss_end = 0;
  auto final_reading = [&]() noexcept {
    fd_end = FdCount(host.pid());
    rss_end = RssKiB(host.pid());
  };
  std::barrier finished(clients, final_reading);
  std::barrier connected(clients);

  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < clients; ++t) {
    threads.emplace_back([&, t] {
      std::map<std::string, std::unique_ptr<RawClient>> connections;  // one per endpoint, kept to the end
      auto client = [&](const std::string& endpoint) -> RawClient& {
        auto& c = connections[endpoint];
        if (!c) c = std::make_unique<RawClient>(host.endpoint(endpoint));
        return *c;
      };
      // Every client opens its connection to every endpoint with one call of each method before the run, so
      // that the warm-up reading already counts all 64 clients' connections.
      for (const Case& c : cases) record(c, client(c.endpoint).Call(c.method, c.request, nullptr));
      connected.arrive_and_wait();
      for (long i; (i = next.fetch_add(1)) < calls;) {
        // One slot in (cases + 1) is a Mkdir + Rmdir pair on this client's own scratch path (two calls).
        size_t pick = static_cast<size_t>(i) % (cases.size() + 1);
        if (pick == cases.size()) {
          std::string dir = kubelet + "/soak/c" + std::to_string(t) + "-" + std::to_string(i);
          Case mk{"filesystem", "csi-proxy-filesystem-v1", "/v1.Filesystem/Mkdir", StringField(1, dir), true};
          Case rm{"filesystem", "csi-proxy-filesystem-v1", "/v1.Filesystem/Rmdir", StringField(1, dir), true};
          record(mk, client(mk.endpoint).Call(mk.method, mk.request, nullptr));
          record(rm, client(rm.endpoint).Call(rm.method, rm.request, nullptr));
        } else {
          const Case& c = cases[pick];
          record(c, client(c.endpoint).Call(c.method, c.request, nullptr));
        }
        if (done.fetch_add(1) + 1 == warmup && !measured.exchange(true)) {
          fd_warm = FdCount(host.pid());
          rss_warm = RssKiB(host.pid());
        }
      }
      finished.arrive_and_wait();
    });
  }
  for (auto& thread : threads) thread.join();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  long fd_gone = FdCount(host.pid());

  bool failed = false;
  long total_unexpected = 0;
  for (const auto& [method, n] : unexpected) total_unexpected += n;
  std::printf(
      "soak: %ld calls (%ld slots, a Mkdir+Rmdir pair is one) by %d clients in %.1f s, %zu methods, %ld unexpected "
      "answers\n",
      rpcs.load(), calls, clients, seconds, cases.size() + 2, total_unexpected);
  for (const auto& [method, code] : first_code) std::printf("soak:   %-45s code %d\n", method.c_str(), code);
  std::printf("soak: host fds %ld after warm-up, %ld at the end (bound +%ld); RSS %ld KiB, %ld KiB (bound +%ld KiB)\n",
              fd_warm, fd_end, kMaxFdGrowth, rss_warm, rss_end, kMaxRssGrowthKiB);
  std::printf("soak: host fds %ld once the clients have disconnected\n", fd_gone);
  if (total_unexpected > 0) failed = true;
  if (fd_end - fd_warm > kMaxFdGrowth) {
    std::fprintf(stderr, "soak: the host's descriptors grew by %ld\n", fd_end - fd_warm);
    failed = true;
  }
  if (rss_end - rss_warm > kMaxRssGrowthKiB) {
    std::fprintf(stderr, "soak: the host's resident memory grew by %ld KiB\n", rss_end - rss_warm);
    failed = true;
  }
  if (!host.Stop().ok()) {
    std::fprintf(stderr, "soak: the host did not stop cleanly\n");
    failed = true;
  }
  // Every Mkdir had its Rmdir: only the fixture's own directory is left.
  long leftovers = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(kubelet + "/soak")) ++leftovers;
  if (leftovers != 1) {
    std::fprintf(stderr, "soak: %ld entries left in the scratch kubelet tree (expected 1)\n", leftovers);
    failed = true;
  }
  if (MountedBelow(scratch.path()) || MountedBelow(host.dir())) {
    std::fprintf(stderr, "soak: a mount is left below the scratch directories\n");
    failed = true;
  }
  std::string loop_name = loop ? loop->name() : "";
  loop.reset();
  if (!loop_name.empty() && fs::exists("/sys/block/" + loop_name + "/loop/backing_file")) {
    std::fprintf(stderr, "soak: loop device %s is still attached\n", loop_name.c_str());
    failed = true;
  }
  std::printf("soak: %s\n", failed ? "FAILED" : "passed");
  return failed ? 1 : 0;
}

}  // namespace
}  // namespace csi_proxy::bench

int main(int argc, char** argv) { return csi_proxy::bench::Run(argc, argv); }

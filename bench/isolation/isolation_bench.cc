// Isolation between groups (issue 9): calls of one group keep their latency while another group
//   - has its whole execution budget (workers and queue) taken by calls that ignore cancellation ("starved"), or
//   - is reloaded again and again: configuration rewritten, SIGHUP, until the host logs "reload finished"
//     ("reloading"),
// against the same calls on an idle host. The calls measured: filesystem PathExists on the kubelet directory and
// the example group's Echo, one after the other from one client, each on its own connection. The other group is
// the blocker test group (tests/host/fixtures/blocker), built for the bench in two copies (versions 1.0.0 and
// 2.0.0) into a folder of its own. Conditions run in interleaved rounds (idle, starved, reloading, then rotated)
// so that noise from other work on the machine falls on all of them alike.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "async_calls.h"
#include "bench_host.h"
#include "cleanup.h"
#include "csi_proxy/admin/v1/admin.pb.h"
#include "log_watcher.h"
#include "raw_client.h"
#include "results.h"
#include "stats.h"
#include "v1/echo.pb.h"
#include "v1/filesystem.pb.h"

namespace csi_proxy::bench {
using namespace ::csi_proxy::testing;  // the support library shared with the tests (tests/support)
namespace {

using std::chrono::milliseconds;

constexpr const char* kSection = "isolation";
// The blocker group's budget: the host's defaults, written out so that the report states them.
constexpr int kBlockerWorkers = 16;
constexpr int kBlockerQueue = 64;
constexpr const char* kBlockerEndpoint = "csi-proxy-blocker-v1";
const std::vector<std::string> kConditions = {"idle", "starved", "reloading"};

std::string BlockerLibrary(int copy) {
  return std::string(CSI_PROXY_BENCH_PLUGIN_DIR) + "/libcsi-proxy-blocker" + std::to_string(copy) + ".so";
}

std::string BlockerToml(const std::string& library, const std::string& tag) {
  return "[groups.blocker]\nlibrary = \"" + library + "\"\ntag = \"" + tag +
         "\"\nworkers = " + std::to_string(kBlockerWorkers) + "\nmax_queued_calls = " + std::to_string(kBlockerQueue) +
         "\n";
}

std::string BlockRequest(const std::string& text, uint32_t delay_ms) {
  v1::EchoRequest req;
  req.set_text(text);
  req.set_delay_ms(delay_ms);
  return req.SerializeAsString();
}

// CPU time (user + system) a process has used so far, in seconds: the host's from /proc, the bench's own from
// getrusage. What each condition costs the machine, to tell a slower call caused by sharing two cores from one
// caused by the host's design.
double HostCpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto close_paren = stat.rfind(')');
  if (close_paren == std::string::npos) return 0;
  std::istringstream fields(stat.substr(close_paren + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::strtod(field.c_str(), nullptr);  // utime, stime
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double SelfCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// A call of a group that is not touched: filesystem PathExists or Echo.
struct Subject {
  std::string id;  // record subject
  std::string endpoint;
  std::string method;
  std::string request;
  bool (*answer_ok)(const std::string& response);
};

struct Window {
  std::vector<LatencySamples> latency;  // by subject
  std::vector<int64_t> failures;
  std::vector<std::string> first_error;
};

// One client calls every subject in turn, back to back, for `duration`.
Window Measure(const std::vector<Subject>& subjects, std::vector<std::unique_ptr<RawClient>>& clients,
               milliseconds duration) {
  Window w;
  w.latency.resize(subjects.size());
  w.failures.assign(subjects.size(), 0);
  w.first_error.resize(subjects.size());
  for (auto& l : w.latency) l.Reserve(1 << 14);
  std::string response;
  auto end = std::chrono::steady_clock::now() + duration;
  while (std::chrono::steady_clock::now() < end) {
    for (size_t i = 0; i < subjects.size(); ++i) {
      auto t0 = std::chrono::steady_clock::now();
      grpc::Status s = clients[i]->Call(subjects[i].method, subjects[i].request, &response, std::chrono::seconds(5));
      auto t1 = std::chrono::steady_clock::now();
      if (!s.ok() || !subjects[i].answer_ok(response)) {
        if (w.failures[i]++ == 0) {
          w.first_error[i] = s.ok() ? "unexpected answer" : std::to_string(s.error_code()) + " " + s.error_message();
        }
        continue;
      }
      w.latency[i].Add(t1 - t0);
    }
  }
  return w;
}

// The blocker group's usage as the host's admin socket reports it.
struct BlockerUsage {
  int running = -1;
  int queued = -1;
  uint64_t refused = 0;
};

std::optional<BlockerUsage> ReadBlockerUsage(RawClient& admin) {
  std::string bytes;
  grpc::Status s =
      admin.Call("/csi_proxy.admin.v1.Admin/Status", ::csi_proxy::admin::v1::StatusRequest().SerializeAsString(),
                 &bytes, std::chrono::seconds(5));
  ::csi_proxy::admin::v1::StatusResponse status;
  if (!s.ok() || !status.ParseFromString(bytes)) return std::nullopt;
  for (const auto& g : status.groups()) {
    if (g.name() == "blocker") return BlockerUsage{g.running(), g.queued(), g.refused()};
  }
  return std::nullopt;
}

// Polls the admin socket until `done(usage)` or `timeout`; returns the last usage read.
template <typename Pred>
std::optional<BlockerUsage> WaitForUsage(RawClient& admin, Pred done, milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::optional<BlockerUsage> u;
  for (;;) {
    u = ReadBlockerUsage(admin);
    if ((u && done(*u)) || std::chrono::steady_clock::now() > deadline) return u;
    std::this_thread::sleep_for(milliseconds(5));
  }
}

// What the starved condition found beside the latency.
struct StarvedTally {
  int64_t fill_calls = 0;
  int64_t extra_calls = 0;
  int64_t exhausted = 0;       // RESOURCE_EXHAUSTED naming the group
  int64_t other_answers = 0;   // anything else to an extra call
  int64_t host_refused = 0;    // the host's own count of refusals, over the window
  int64_t rounds_skipped = 0;  // the budget did not fill
};

// What the reloading condition found.
struct ReloadTally {
  int64_t reloads = 0;
  int64_t refused = 0;         // a reload that did not apply the change
  int64_t wrong_instance = 0;  // Tag did not answer the new version and tag right after the reload
  LatencySamples took;         // from SIGHUP to the "reload finished" line, seen from the bench
  int64_t host_max_ms = 0;     // the largest "reload finished in N ms" (whole milliseconds)
  double seconds = 0;
};

class IsolationBench {
 public:
  IsolationBench(BenchHost& host, std::vector<Subject> subjects, bool quick)
      : host_(host),
        subjects_(std::move(subjects)),
        window_(quick ? 300 : 2000),
        admin_(host.admin_socket()),
        blocker_(host.endpoint(kBlockerEndpoint)),
        watcher_(host.log_path()) {
    for (const auto& s : subjects_) clients_.push_back(std::make_unique<RawClient>(host.endpoint(s.endpoint)));
  }

  milliseconds window() const { return window_; }

  bool WarmUp() {
    std::string response;
    for (size_t i = 0; i < subjects_.size(); ++i) {
      grpc::Status s = clients_[i]->Call(subjects_[i].method, subjects_[i].request, &response);
      if (!s.ok() || !subjects_[i].answer_ok(response)) {
        std::cerr << subjects_[i].id << " does not answer as expected: " << s.error_message() << "\n";
        return false;
      }
      for (int k = 0; k < 300; ++k) (void)clients_[i]->Call(subjects_[i].method, subjects_[i].request, nullptr);
    }
    if (!ReadBlockerUsage(admin_)) {
      std::cerr << "the admin socket " << host_.admin_socket() << " does not report the blocker group\n";
      return false;
    }
    return TagIs("1.0.0:start");
  }

  Window Idle() { return Measure(subjects_, clients_, window_); }

  // Fills the blocker group's workers and queue with Block calls that ignore cancellation, then measures while
  // a second client keeps asking the group for more (each answer should be RESOURCE_EXHAUSTED).
  std::optional<Window> Starved() {
    // The handlers give their worker back after `hold`; the calls' deadline passes just before that, so the
    // queued ones are dropped unrun when a worker takes them and the group is empty right after `hold`.
    const auto hold = window_ + milliseconds(2000);
    auto filled_at = std::chrono::steady_clock::now();
    AsyncCalls fill(host_.endpoint(kBlockerEndpoint));
    const std::string block = BlockRequest("ignore-cancel", static_cast<uint32_t>(hold.count()));
    for (int i = 0; i < kBlockerWorkers + kBlockerQueue; ++i) fill.Start("/v1.Blocker/Block", block, hold);
    starved_.fill_calls += kBlockerWorkers + kBlockerQueue;
    auto full = WaitForUsage(
        admin_, [](const BlockerUsage& u) { return u.running == kBlockerWorkers && u.queued == kBlockerQueue; },
        milliseconds(1500));
    std::optional<Window> w;
    if (!full || full->running != kBlockerWorkers || full->queued != kBlockerQueue) {
      ++starved_.rounds_skipped;
      Results::Get().Note(kSection,
                          "a starved round was skipped: the blocker group's budget did not fill within 1.5 s");
    } else {
      std::atomic<bool> stop{false};
      std::thread extra([&] {
        RawClient client(host_.endpoint(kBlockerEndpoint));
        const std::string one_ms = BlockRequest("ignore-cancel", 1);
        while (!stop.load()) {
          grpc::Status s = client.Call("/v1.Blocker/Block", one_ms, nullptr, std::chrono::seconds(2));
          ++starved_.extra_calls;
          if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
              s.error_message().find("group 'blocker'") != std::string::npos) {
            ++starved_.exhausted;
          } else if (starved_.other_answers++ == 0) {
            Results::Get().Note(kSection, "an extra call to the starved blocker group was answered " +
                                              std::to_string(s.error_code()) + " " + s.error_message());
          }
          std::this_thread::sleep_for(milliseconds(10));
        }
      });
      w = Measure(subjects_, clients_, window_);
      stop = true;
      extra.join();
      if (std::chrono::steady_clock::now() > filled_at + hold) {
        Results::Get().Note(kSection, "a starved round ended after the blocker calls had given their workers back");
      }
      auto after = ReadBlockerUsage(admin_);
      if (after) starved_.host_refused += static_cast<int64_t>(after->refused - full->refused);
    }
    // Wait for the group to be empty again, so that the next round starts from an idle host.
    fill.WaitAll(hold + milliseconds(5000));
    auto empty = WaitForUsage(
        admin_, [](const BlockerUsage& u) { return u.running == 0 && u.queued == 0; }, milliseconds(5000));
    if (!empty || empty->running != 0 || empty->queued != 0) {
      Results::Get().Note(kSection, "the blocker group was still busy 5 s after a starved round");
    }
    for (const auto& [code, count] : fill.answers()) {
      if (code != grpc::StatusCode::DEADLINE_EXCEEDED && code != grpc::StatusCode::OK) {
        Results::Get().Note(kSection, std::to_string(count) + " calls filling the budget were answered " +
                                          std::to_string(code) + " " + fill.first_messages()[code]);
      }
    }
    return w;
  }

  // Reloads the blocker group back to back on a thread of its own while the client measures.
  Window Reloading() {
    std::atomic<bool> stop{false};
    auto started = std::chrono::steady_clock::now();
    std::thread reloader([&] {
      while (!stop.load() && ReloadOnce()) {
      }
    });
    Window w = Measure(subjects_, clients_, window_);
    stop = true;
    reloader.join();
    reloads_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return w;
  }

  const StarvedTally& starved() const { return starved_; }
  ReloadTally& reloads() { return reloads_; }

 private:
  bool TagIs(const std::string& expected) {
    std::string bytes;
    v1::EchoResponse resp;
    grpc::Status s = blocker_.Call("/v1.Blocker/Tag", BlockRequest("", 0), &bytes, std::chrono::seconds(5));
    if (s.ok() && resp.ParseFromString(bytes) && resp.text() == expected) return true;
    std::cerr << "blocker Tag: expected " << expected << ", got " << (s.ok() ? resp.text() : s.error_message()) << "\n";
    return false;
  }

  // One reload: the blocker group's library switches to the other copy and its tag changes.
  bool ReloadOnce() {
    int n = ++reload_serial_;
    int copy = n % 2 == 1 ? 2 : 1;
    std::string tag = "r" + std::to_string(n);
    if (Status s = host_.RewriteConfig(BlockerToml(BlockerLibrary(copy), tag)); !s.ok()) {
      Results::Get().Note(kSection, "reloads stopped: " + s.message());
      return false;
    }
    auto signalled = std::chrono::steady_clock::now();
    kill(host_.pid(), SIGHUP);
    auto line = watcher_.WaitFor({"reload finished in ", "reload refused"}, std::chrono::seconds(15));
    reloads_.took.Add(std::chrono::steady_clock::now() - signalled);
    if (!line) {
      Results::Get().Note(kSection, "reloads stopped: no \"reload finished\" line 15 s after SIGHUP");
      return false;
    }
    ++reloads_.reloads;
    if (auto at = line->find("reload finished in "); at != std::string::npos) {
      reloads_.host_max_ms = std::max<int64_t>(reloads_.host_max_ms, std::strtol(line->c_str() + at + 19, nullptr, 10));
    }
    if (line->find("group 'blocker' reloaded") == std::string::npos || line->find("refused") != std::string::npos) {
      if (reloads_.refused++ == 0) Results::Get().Note(kSection, "a reload did not apply as expected: " + *line);
    }
    if (!TagIs((copy == 2 ? "2.0.0:" : "1.0.0:") + tag)) ++reloads_.wrong_instance;
    return true;
  }

  BenchHost& host_;
  std::vector<Subject> subjects_;
  std::vector<std::unique_ptr<RawClient>> clients_;
  milliseconds window_;
  RawClient admin_;
  RawClient blocker_;
  LogWatcher watcher_;
  StarvedTally starved_;
  ReloadTally reloads_;
  int reload_serial_ = 0;
};

bool PathExistsTrue(const std::string& bytes) {
  v1::PathExistsResponse r;
  return r.ParseFromString(bytes) && r.exists();
}
bool EchoesPing(const std::string& bytes) {
  v1::EchoResponse r;
  return r.ParseFromString(bytes) && r.text() == "ping";
}

int Main(int argc, char** argv) {
  InstallCleanupHandlers();
  CommonFlags flags = ParseCommonFlags(&argc, argv);
  const int rounds = flags.quick ? 2 : 5;
  Results& results = Results::Get();

  for (int copy : {1, 2}) {
    if (!std::filesystem::exists(BlockerLibrary(copy))) {
      std::cerr << BlockerLibrary(copy) << " is missing (build the target csi_proxy_bench_isolation)\n";
      return 1;
    }
  }
  std::vector<std::string> groups = {"echo"};
  const bool filesystem = !GroupLibrary("filesystem").empty();
  if (filesystem) {
    groups.push_back("filesystem");
  } else {
    results.Note(kSection, "the filesystem group was not built: only Echo was measured");
  }
  BenchHost host(groups, "", BlockerToml(BlockerLibrary(1), "start"));
  std::vector<std::string> endpoints = {"csi-proxy-echo-v1", kBlockerEndpoint};
  if (filesystem) endpoints.push_back("csi-proxy-filesystem-v1");
  if (auto started = host.Start(endpoints); !started.ok()) {
    std::cerr << started.status().message() << "\n";
    return 1;
  }

  std::vector<Subject> subjects;
  if (filesystem) {
    v1::PathExistsRequest req;
    req.set_path(host.kubelet_dir());
    subjects.push_back({"filesystem", "csi-proxy-filesystem-v1", "/v1.Filesystem/PathExists", req.SerializeAsString(),
                        PathExistsTrue});
  }
  v1::EchoRequest echo;
  echo.set_text("ping");
  subjects.push_back({"echo", "csi-proxy-echo-v1", "/v1.Echo/Echo", echo.SerializeAsString(), EchoesPing});

  IsolationBench bench(host, subjects, flags.quick);
  if (!bench.WarmUp()) return 1;
  results.Add(kSection, "config", "", "rounds", rounds, "");
  results.Add(kSection, "config", "", "round_ms", static_cast<double>(bench.window().count()), "ms");
  results.Add(kSection, "config", "", "blocker_workers", kBlockerWorkers, "");
  results.Add(kSection, "config", "", "blocker_max_queued_calls", kBlockerQueue, "");

  std::map<std::string, std::vector<LatencySamples>> latency;
  std::map<std::string, std::vector<int64_t>> failures;
  std::map<std::string, double> host_cpu, bench_cpu, wall;  // seconds, by condition
  for (const auto& c : kConditions) {
    latency[c].resize(subjects.size());
    failures[c].assign(subjects.size(), 0);
  }
  for (int round = 0; round < rounds; ++round) {
    for (size_t k = 0; k < kConditions.size(); ++k) {
      const std::string& condition = kConditions[(k + static_cast<size_t>(round)) % kConditions.size()];
      std::optional<Window> w;
      double host0 = HostCpuSeconds(host.pid()), self0 = SelfCpuSeconds();
      auto t0 = std::chrono::steady_clock::now();
      if (condition == "idle") w = bench.Idle();
      if (condition == "starved") w = bench.Starved();
      if (condition == "reloading") w = bench.Reloading();
      if (!w) continue;
      wall[condition] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      host_cpu[condition] += HostCpuSeconds(host.pid()) - host0;
      bench_cpu[condition] += SelfCpuSeconds() - self0;
      for (size_t i = 0; i < subjects.size(); ++i) {
        std::fprintf(stderr, "%-10s %-11s round %d: p50 %7.1f us  p99 %7.1f us  calls %6zu  failed %lld\n",
                     subjects[i].id.c_str(), condition.c_str(), round, w->latency[i].PercentileUs(50),
                     w->latency[i].PercentileUs(99), w->latency[i].size(), static_cast<long long>(w->failures[i]));
        latency[condition][i].Merge(w->latency[i]);
        failures[condition][i] += w->failures[i];
        if (w->failures[i] > 0) {
          results.Note(kSection, subjects[i].id + " (" + condition + "): " + std::to_string(w->failures[i]) +
                                     " failed calls, first: " + w->first_error[i]);
        }
      }
    }
  }

  for (const auto& c : kConditions) {
    // Percent of one core over the condition's rounds (the starved ones include filling and emptying the group).
    if (wall[c] > 0) {
      results.Add(kSection, "cpu", c, "host_pct", 100 * host_cpu[c] / wall[c], "%");
      results.Add(kSection, "cpu", c, "bench_pct", 100 * bench_cpu[c] / wall[c], "%");
    }
    for (size_t i = 0; i < subjects.size(); ++i) {
      LatencySamples& l = latency[c][i];
      const std::string& id = subjects[i].id;
      results.Add(kSection, id, c, "p50_us", l.PercentileUs(50), "us");
      results.Add(kSection, id, c, "p90_us", l.PercentileUs(90), "us");
      results.Add(kSection, id, c, "p99_us", l.PercentileUs(99), "us");
      results.Add(kSection, id, c, "mean_us", l.MeanUs(), "us");
      results.Add(kSection, id, c, "samples", static_cast<double>(l.size()), "");
      results.Add(kSection, id, c, "failed_calls", static_cast<double>(failures[c][i]), "");
    }
  }
  const StarvedTally& s = bench.starved();
  results.Add(kSection, "blocker", "starved", "fill_calls", static_cast<double>(s.fill_calls), "");
  results.Add(kSection, "blocker", "starved", "extra_calls", static_cast<double>(s.extra_calls), "");
  results.Add(kSection, "blocker", "starved", "resource_exhausted", static_cast<double>(s.exhausted), "");
  results.Add(kSection, "blocker", "starved", "other_answers", static_cast<double>(s.other_answers), "");
  results.Add(kSection, "blocker", "starved", "host_refused", static_cast<double>(s.host_refused), "");
  results.Add(kSection, "blocker", "starved", "rounds_skipped", static_cast<double>(s.rounds_skipped), "");
  ReloadTally& r = bench.reloads();
  results.Add(kSection, "blocker", "reloading", "reloads", static_cast<double>(r.reloads), "");
  results.Add(kSection, "blocker", "reloading", "reloads_per_s", r.seconds > 0 ? r.reloads / r.seconds : 0, "/s");
  results.Add(kSection, "blocker", "reloading", "reload_p50_ms", r.took.PercentileUs(50) / 1000, "ms");
  results.Add(kSection, "blocker", "reloading", "reload_max_ms", r.took.MaxUs() / 1000, "ms");
  results.Add(kSection, "blocker", "reloading", "host_reload_max_ms", static_cast<double>(r.host_max_ms), "ms");
  results.Add(kSection, "blocker", "reloading", "refused_reloads", static_cast<double>(r.refused), "");
  results.Add(kSection, "blocker", "reloading", "wrong_instance", static_cast<double>(r.wrong_instance), "");

  if (auto stopped = host.Stop(); !stopped.ok()) results.Note(kSection, stopped.status().message());
  return results.Write() ? 0 : 1;
}

}  // namespace
}  // namespace csi_proxy::bench

int main(int argc, char** argv) { return csi_proxy::bench::Main(argc, argv); }

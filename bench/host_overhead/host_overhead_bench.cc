// Host overhead: the same trivial Echo handler served
//   (a) by csi-proxy: the host's router, the C ABI and the example group library (whose Echo is declared
//       NONBLOCKING), once without and once with Prometheus metrics ([host] metrics_address), which record every
//       call; and a third time with a library built against the plain C header (tests/host/fixtures/version1.c,
//       no flags: its Echo runs within the group's budget, as every third-party method does); and with the echo
//       group isolated (isolation = "process": the library in its runner, one more hop over a socket pair), and
//       the plain C library isolated too (host-blocking-isolated);
//   (b) by a plain gRPC C++ server with the generated service (echo_baseline_server.cc), sync and callback, and
//       callback again taking its connections the way the host does (accepted, then handed to gRPC by fd).
// One client measures the latency distribution; 1, 16 and 64 concurrent clients (one connection each)
// measure throughput. Servers are measured in interleaved rounds (host, sync, callback, then rotated), so
// that noise from other work on the machine falls on all of them alike. Each server is a separate process
// on a Unix socket; the client code is the same for all.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "bench_host.h"
#include "child_process.h"
#include "cleanup.h"
#include "loopback_port.h"
#include "raw_client.h"
#include "results.h"
#include "stats.h"
#include "temp_dir.h"
#include "v1/echo.pb.h"

namespace csi_proxy::bench {
using namespace ::csi_proxy::testing;  // the support library shared with the tests (tests/support)
namespace {

constexpr const char* kMethod = "/v1.Echo/Echo";
constexpr int kWorkers = 16;  // the host's default worker pool; the sync baseline gets as many threads

struct Server {
  std::string
      id;  // record subject: host, host-metrics, host-blocking, host-isolated, ..., grpc-sync, grpc-callback, ...
  std::string socket;
  pid_t pid = -1;
  pid_t runner = -1;  // an isolated group's runner, whose switches are counted apart
};

// What each thread of `pid` has used so far, by thread id: its context switches (voluntary and not) and its time
// on a CPU. Their growth over a round, per call, says how many times a call made the server's threads sleep or
// give way, and what CPU time it cost (a thread that spins instead of sleeping pays here).
struct ThreadCounts {
  int64_t switches = 0;
  int64_t cpu_ns = 0;
};
std::map<std::string, ThreadCounts> CountThreads(pid_t pid) {
  std::map<std::string, ThreadCounts> by_thread;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    ThreadCounts& counts = by_thread[task.path().filename().string()];
    std::ifstream status(task.path() / "status");
    for (std::string line; std::getline(status, line);) {
      if (line.starts_with("voluntary_ctxt_switches:") || line.starts_with("nonvoluntary_ctxt_switches:")) {
        counts.switches += std::stoll(line.substr(line.find(':') + 1));
      }
    }
    std::ifstream schedstat(task.path() / "schedstat");  // its first field: nanoseconds on a CPU
    schedstat >> counts.cpu_ns;
  }
  return by_thread;
}

// The growth between two readings: threads that ended in between are lost (the sync server ends idle threads),
// threads started in between count whole.
ThreadCounts CountsBetween(const std::map<std::string, ThreadCounts>& before,
                           const std::map<std::string, ThreadCounts>& after) {
  ThreadCounts total;
  for (const auto& [tid, counts] : after) {
    auto it = before.find(tid);
    total.switches += counts.switches - (it == before.end() ? 0 : it->second.switches);
    total.cpu_ns += counts.cpu_ns - (it == before.end() ? 0 : it->second.cpu_ns);
  }
  return total;
}

struct LoadResult {
  double calls_per_s = 0;
  LatencySamples latency;
  int64_t failures = 0;
  std::string first_error;
  int64_t rss_peak_kib = -1;
  int64_t threads_peak = -1;
  double switches_per_call = 0;
  double runner_switches_per_call = 0;
  double cpu_us_per_call = 0;  // the server's threads' CPU time
  double runner_cpu_us_per_call = 0;
};

// `clients` threads, each with its own connection, call the server back to back for `duration`.
LoadResult RunLoad(const Server& server, const std::string& request, int clients, std::chrono::milliseconds duration) {
  std::vector<std::unique_ptr<RawClient>> conns;
  for (int i = 0; i < clients; ++i) {
    conns.push_back(std::make_unique<RawClient>(server.socket));
    (void)conns.back()->Call(kMethod, request, nullptr);  // connect outside the measurement
  }
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::atomic<bool> stop{false};
  std::vector<LatencySamples> samples(clients);
  std::vector<int64_t> counts(clients, 0), failures(clients, 0);
  std::vector<std::string> errors(clients);
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] {
      samples[i].Reserve(1 << 14);
      ++ready;
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      while (!stop.load(std::memory_order_relaxed)) {
        auto t0 = std::chrono::steady_clock::now();
        grpc::Status s = conns[i]->Call(kMethod, request, nullptr);
        auto t1 = std::chrono::steady_clock::now();
        if (stop.load(std::memory_order_relaxed)) break;  // finished after the window: not counted
        if (!s.ok()) {
          if (failures[i]++ == 0) errors[i] = s.error_message();
          continue;
        }
        samples[i].Add(t1 - t0);
        ++counts[i];
      }
    });
  }
  while (ready.load() < clients) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  LoadResult r;
  const auto counts_before = CountThreads(server.pid);
  const auto runner_counts_before = server.runner > 0 ? CountThreads(server.runner) : decltype(counts_before){};
  auto start = std::chrono::steady_clock::now();
  go.store(true, std::memory_order_release);
  auto end = start + duration;
  while (std::chrono::steady_clock::now() < end) {
    ProcessMemory m = ReadProcessMemory(server.pid);
    r.rss_peak_kib = std::max(r.rss_peak_kib, m.rss_kib);
    r.threads_peak = std::max(r.threads_peak, m.threads);
    std::this_thread::sleep_for(
        std::min<std::chrono::nanoseconds>(std::chrono::milliseconds(10), end - std::chrono::steady_clock::now()));
  }
  stop.store(true);
  auto elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (auto& t : threads) t.join();
  int64_t total = 0;
  for (int i = 0; i < clients; ++i) {
    total += counts[i];
    r.failures += failures[i];
    if (r.first_error.empty()) r.first_error = errors[i];
    r.latency.Merge(samples[i]);
  }
  r.calls_per_s = static_cast<double>(total) / elapsed;
  if (total > 0) {
    const ThreadCounts used = CountsBetween(counts_before, CountThreads(server.pid));
    r.switches_per_call = static_cast<double>(used.switches) / static_cast<double>(total);
    r.cpu_us_per_call = static_cast<double>(used.cpu_ns) / 1e3 / static_cast<double>(total);
    if (server.runner > 0) {
      const ThreadCounts runner_used = CountsBetween(runner_counts_before, CountThreads(server.runner));
      r.runner_switches_per_call = static_cast<double>(runner_used.switches) / static_cast<double>(total);
      r.runner_cpu_us_per_call = static_cast<double>(runner_used.cpu_ns) / 1e3 / static_cast<double>(total);
    }
  }
  return r;
}

// The host's one child: the isolated group's runner.
pid_t RunnerOf(pid_t host) {
  std::ifstream children("/proc/" + std::to_string(host) + "/task/" + std::to_string(host) + "/children");
  pid_t child = -1;
  children >> child;
  if (child > 0) return child;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(host) + "/task")) {
    std::ifstream c(task.path() / "children");
    if (c >> child) return child;
  }
  return -1;
}

// Proportional set size (the shared pages divided among their sharers), in KiB; -1 when unreadable.
int64_t PssKib(pid_t pid) {
  std::ifstream rollup("/proc/" + std::to_string(pid) + "/smaps_rollup");
  for (std::string line; std::getline(rollup, line);) {
    if (line.rfind("Pss:", 0) == 0) return std::stoll(line.substr(4));
  }
  return -1;
}

std::string SelfDir() { return std::filesystem::read_symlink("/proc/self/exe").parent_path().string(); }

// --servers=host,grpc-sync,... measures only those (all when absent); --rounds=N overrides the rounds;
// --clients=1,16 only those numbers of clients (1, 16 and 64 when absent); --reference-host=PATH also measures the
// blocking method and the isolated group through another build of csi-proxy (e.g. the commit before a change of
// the call path), as host-blocking-ref and host-isolated-ref, interleaved with the rest.
struct Selection {
  std::set<std::string> servers;
  int rounds = 0;
  std::vector<int> clients;
  std::string reference_host;
  bool Wants(const std::string& id) const { return servers.empty() || servers.contains(id); }
};
Selection ParseSelection(int argc, char** argv) {
  Selection sel;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.starts_with("--servers=")) {
      std::istringstream list(a.substr(std::strlen("--servers=")));
      for (std::string id; std::getline(list, id, ',');) sel.servers.insert(id);
    } else if (a.starts_with("--rounds=")) {
      sel.rounds = std::stoi(a.substr(std::strlen("--rounds=")));
    } else if (a.starts_with("--clients=")) {
      std::istringstream list(a.substr(std::strlen("--clients=")));
      for (std::string n; std::getline(list, n, ',');) sel.clients.push_back(std::stoi(n));
    } else if (a.starts_with("--reference-host=")) {
      sel.reference_host = a.substr(std::strlen("--reference-host="));
    }
  }
  return sel;
}

int Main(int argc, char** argv) {
  InstallCleanupHandlers();
  CommonFlags flags = ParseCommonFlags(&argc, argv);
  const Selection selection = ParseSelection(argc, argv);
  // Rounds of every server are interleaved; the median of 9 rides out bursts of other work on a shared machine.
  const int rounds = selection.rounds > 0 ? selection.rounds : flags.quick ? 2 : 9;
  const auto duration = std::chrono::milliseconds(flags.quick ? 300 : 1000);
  const std::vector<int> concurrency = selection.clients.empty() ? std::vector<int>{1, 16, 64} : selection.clients;
  Results& results = Results::Get();

  const std::string workers = "workers = " + std::to_string(kWorkers) + "\n";
  BenchHost host({"echo"}, workers);
  BenchHost metered(
      {"echo"}, workers + "metrics_address = \"127.0.0.1:" + std::to_string(test_support::FreeLoopbackPort()) + "\"\n");
  // The library built against the plain C header, from the bench's own folder (never the host's plugin_dir).
  const std::string plain_c_group =
      "[groups.version1]\nenabled = true\nlibrary = \"" CSI_PROXY_BENCH_PLUGIN_DIR "/libcsi-proxy-version1.so\"\n";
  BenchHost blocking({}, workers, plain_c_group);
  BenchHost reference({}, workers, plain_c_group, selection.reference_host);
  const std::string isolated_echo = "[groups.echo]\nisolation = \"process\"\n";
  BenchHost isolated({}, workers, isolated_echo);
  BenchHost isolated_reference({}, workers, isolated_echo, selection.reference_host);
  const std::string isolated_plain_c_group = plain_c_group + "isolation = \"process\"\n";
  BenchHost blocking_isolated({}, workers, isolated_plain_c_group);
  BenchHost blocking_isolated_reference({}, workers, isolated_plain_c_group, selection.reference_host);
  std::vector<Server> servers;
  std::vector<BenchHost*> started_hosts;
  for (auto [id, bench_host, endpoint] :
       {std::tuple{"host", &host, "csi-proxy-echo-v1"}, std::tuple{"host-metrics", &metered, "csi-proxy-echo-v1"},
        std::tuple{"host-blocking", &blocking, "csi-proxy-version1-v1"},
        std::tuple{"host-blocking-ref", &reference, "csi-proxy-version1-v1"},
        std::tuple{"host-isolated", &isolated, "csi-proxy-echo-v1"},
        std::tuple{"host-isolated-ref", &isolated_reference, "csi-proxy-echo-v1"},
        std::tuple{"host-blocking-isolated", &blocking_isolated, "csi-proxy-version1-v1"},
        std::tuple{"host-blocking-isolated-ref", &blocking_isolated_reference, "csi-proxy-version1-v1"}}) {
    const bool is_reference =
        bench_host == &reference || bench_host == &isolated_reference || bench_host == &blocking_isolated_reference;
    if (!selection.Wants(id) || (is_reference && selection.reference_host.empty())) continue;
    if (auto started = bench_host->Start({endpoint}); !started.ok()) {
      std::cerr << id << ": " << started.status().message() << "\n";
      return 1;
    }
    const bool has_runner = bench_host == &isolated || bench_host == &isolated_reference ||
                            bench_host == &blocking_isolated || bench_host == &blocking_isolated_reference;
    servers.push_back(
        {id, bench_host->endpoint(endpoint), bench_host->pid(), has_runner ? RunnerOf(bench_host->pid()) : -1});
    started_hosts.push_back(bench_host);
  }
  TempDir scratch("csi-proxy-bench-baseline");
  std::string baseline = SelfDir() + "/csi-proxy-bench-echo-baseline";
  std::vector<ChildProcess> baselines;
  // The last takes its connections as the host does (it accepts them and hands each to gRPC).
  for (std::string mode : {"sync", "callback", "callback-fd"}) {
    if (!selection.Wants("grpc-" + mode)) continue;
    std::string socket = scratch.Sub(mode + ".sock");
    std::vector<std::string> argv = {baseline, "--socket", socket, "--threads", std::to_string(kWorkers)};
    argv.insert(argv.end(), {"--mode", mode == "sync" ? "sync" : "callback"});
    if (mode == "callback-fd") argv.push_back("--adopt");
    auto child = ChildProcess::Start(argv, scratch.Sub(mode + ".log"));
    if (!child.ok()) {
      std::cerr << child.status().message() << "\n";
      return 1;
    }
    servers.push_back({"grpc-" + mode, socket, child->pid()});
    baselines.push_back(std::move(*child));
  }
  for (const Server& s : servers) std::fprintf(stderr, "%-16s pid %d\n", s.id.c_str(), static_cast<int>(s.pid));

  v1::EchoRequest req;
  req.set_text("ping");
  const std::string request = req.SerializeAsString();
  for (const Server& s : servers) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!ServerAnswers(s.socket, std::chrono::milliseconds(500))) {
      if (std::chrono::steady_clock::now() > deadline) {
        std::cerr << s.id << " does not answer on " << s.socket << "\n";
        return 1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    RawClient client(s.socket);
    std::string bytes;
    v1::EchoResponse resp;
    grpc::Status st = client.Call(kMethod, request, &bytes);
    if (!st.ok() || !resp.ParseFromString(bytes) || resp.text() != "ping") {
      std::cerr << s.id << " does not echo: " << st.error_message() << "\n";
      return 1;
    }
    for (int i = 0; i < 500; ++i) (void)client.Call(kMethod, request, nullptr);  // warm up both ends
    ProcessMemory m = ReadProcessMemory(s.pid);
    results.Add("overhead", s.id, "idle", "rss_kib", static_cast<double>(m.rss_kib), "KiB");
    results.Add("overhead", s.id, "idle", "threads", static_cast<double>(m.threads), "");
  }
  // What an isolated group costs at rest: its runner's memory (RSS; PSS shares the library pages it has in
  // common with the host) and threads.
  if (pid_t runner = selection.Wants("host-isolated") ? RunnerOf(isolated.pid()) : -1; runner > 0) {
    ProcessMemory m = ReadProcessMemory(runner);
    results.Add("overhead", "runner", "idle", "rss_kib", static_cast<double>(m.rss_kib), "KiB");
    results.Add("overhead", "runner", "idle", "pss_kib", static_cast<double>(PssKib(runner)), "KiB");
    results.Add("overhead", "runner", "idle", "threads", static_cast<double>(m.threads), "");
  } else if (selection.Wants("host-isolated")) {
    results.Note("overhead", "the isolated host has no runner to measure");
  }
  results.Add("overhead", "config", "", "workers", kWorkers, "");
  results.Add("overhead", "config", "", "rounds", rounds, "");
  results.Add("overhead", "config", "", "round_ms", static_cast<double>(duration.count()), "ms");

  for (int clients : concurrency) {
    std::string param = std::to_string(clients) + (clients == 1 ? " client" : " clients");
    std::vector<LatencySamples> latency(servers.size());
    std::vector<std::vector<double>> rates(servers.size());
    std::vector<std::vector<double>> switches(servers.size()), runner_switches(servers.size());
    std::vector<std::vector<double>> cpu(servers.size()), runner_cpu(servers.size());
    std::vector<int64_t> rss_peak(servers.size(), -1), threads_peak(servers.size(), -1);
    for (int round = 0; round < rounds; ++round) {
      for (size_t k = 0; k < servers.size(); ++k) {
        size_t i = (k + static_cast<size_t>(round)) % servers.size();  // rotate who goes first
        LoadResult r = RunLoad(servers[i], request, clients, duration);
        if (r.failures > 0) {
          results.Note("overhead", servers[i].id + " with " + param + ": " + std::to_string(r.failures) +
                                       " failed calls, first: " + r.first_error);
        }
        std::fprintf(stderr,
                     "%-17s %-11s round %d: %9.0f calls/s  p50 %7.1f us  p99 %7.1f us  %5.2f switches/call (runner "
                     "%.2f)  cpu %5.1f us/call (runner %.1f)\n",
                     servers[i].id.c_str(), param.c_str(), round, r.calls_per_s, r.latency.PercentileUs(50),
                     r.latency.PercentileUs(99), r.switches_per_call, r.runner_switches_per_call, r.cpu_us_per_call,
                     r.runner_cpu_us_per_call);
        rates[i].push_back(r.calls_per_s);
        switches[i].push_back(r.switches_per_call);
        runner_switches[i].push_back(r.runner_switches_per_call);
        cpu[i].push_back(r.cpu_us_per_call);
        runner_cpu[i].push_back(r.runner_cpu_us_per_call);
        latency[i].Merge(r.latency);
        rss_peak[i] = std::max(rss_peak[i], r.rss_peak_kib);
        threads_peak[i] = std::max(threads_peak[i], r.threads_peak);
      }
    }
    for (size_t i = 0; i < servers.size(); ++i) {
      const std::string& id = servers[i].id;
      results.Add("overhead", id, param, "calls_per_s", Median(rates[i]), "calls/s");
      results.Add("overhead", id, param, "p50_us", latency[i].PercentileUs(50), "us");
      results.Add("overhead", id, param, "p90_us", latency[i].PercentileUs(90), "us");
      results.Add("overhead", id, param, "p99_us", latency[i].PercentileUs(99), "us");
      results.Add("overhead", id, param, "p999_us", latency[i].PercentileUs(99.9), "us");
      results.Add("overhead", id, param, "mean_us", latency[i].MeanUs(), "us");
      results.Add("overhead", id, param, "samples", static_cast<double>(latency[i].size()), "");
      results.Add("overhead", id, param, "rss_peak_kib", static_cast<double>(rss_peak[i]), "KiB");
      results.Add("overhead", id, param, "threads_peak", static_cast<double>(threads_peak[i]), "");
      results.Add("overhead", id, param, "switches_per_call", Median(switches[i]), "");
      results.Add("overhead", id, param, "cpu_us_per_call", Median(cpu[i]), "us");
      if (servers[i].runner > 0) {
        results.Add("overhead", id, param, "runner_switches_per_call", Median(runner_switches[i]), "");
        results.Add("overhead", id, param, "runner_cpu_us_per_call", Median(runner_cpu[i]), "us");
      }
    }
  }

  for (auto& b : baselines) b.Stop();
  for (BenchHost* h : started_hosts) {
    if (auto stopped = h->Stop(); !stopped.ok()) results.Note("overhead", stopped.status().message());
  }
  return results.Write() ? 0 : 1;
}

}  // namespace
}  // namespace csi_proxy::bench

int main(int argc, char** argv) { return csi_proxy::bench::Main(argc, argv); }

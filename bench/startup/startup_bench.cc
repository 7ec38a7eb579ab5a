// Start-up and memory of the real host:
//   - from exec to every enabled endpoint answering a gRPC call, for the echo group alone and for every API
//     group whose library was built (the report names them), and the time SIGTERM takes to stop it;
//   - resident memory (VmRSS) of the host with every built group (and the echo group), idle and under load
//     from 64 clients calling the groups' read-only methods.
// Requests are encoded here by hand (an empty message, or one string in field 1), so this program needs no
// group's generated code and runs whatever groups exist.
#include <atomic>
#include <cstdio>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

#include "bench_host.h"
#include "cleanup.h"
#include "raw_client.h"
#include "results.h"
#include "stats.h"

namespace csi_proxy::bench {
using namespace ::csi_proxy::testing;  // the support library shared with the tests (tests/support)
namespace {

// A message whose field 1 is the string `s` (proto3 wire format: tag 0x0a, varint length, bytes).
std::string StringField1(const std::string& s) {
  std::string out = "\x0a";
  size_t n = s.size();
  do {
    uint8_t byte = n & 0x7f;
    n >>= 7;
    out.push_back(static_cast<char>(n ? byte | 0x80 : byte));
  } while (n);
  return out + s;
}

struct LoadCall {
  std::string endpoint, method, request;
};

// Read-only calls of each group, for the load; only groups that are served are used.
std::vector<LoadCall> LoadMix(const BenchHost& host, const std::vector<EndpointInfo>& served) {
  std::vector<LoadCall> all = {
      {"csi-proxy-echo-v1", "/v1.Echo/Echo", StringField1("ping")},
      {"csi-proxy-filesystem-v1", "/v1.Filesystem/PathExists", StringField1(host.kubelet_dir())},
      {"csi-proxy-disk-v1", "/v1.Disk/ListDiskIDs", ""},
      {"csi-proxy-disk-v1", "/v1.Disk/ListDiskLocations", ""},
      {"csi-proxy-volume-v1", "/v1.Volume/GetVolumeIDFromTargetPath", StringField1(host.kubelet_dir())},
      {"csi-proxy-volume-v2alpha1", "/v2alpha1.Volume/GetClosestVolumeIDFromTargetPath",
       StringField1(host.kubelet_dir())},
      {"csi-proxy-iscsi-v1alpha2", "/v1alpha2.Iscsi/ListTargetPortals", ""},
      {"csi-proxy-system-v1alpha1", "/v1alpha1.System/GetBIOSSerialNumber", ""},
  };
  std::vector<LoadCall> mix;
  for (const auto& c : all) {
    for (const auto& e : served) {
      if (e.name == c.endpoint) mix.push_back(c);
    }
  }
  return mix;
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// Starts and stops the host `runs` times; records start-up and stop times.
bool MeasureStartup(const std::string& subject, const std::vector<std::string>& groups, int runs) {
  Results& results = Results::Get();
  BenchHost host(groups);
  std::vector<std::string> refusals;
  auto endpoints = host.CheckConfig(&refusals);
  for (const auto& r : refusals) results.Note("startup", subject + ": the host refuses a group: " + r);
  if (!endpoints.ok() || endpoints->empty()) {
    results.Note("startup", subject + ": skipped, nothing to serve" +
                                (endpoints.ok() ? std::string() : ": " + endpoints.status().message()));
    return false;
  }
  std::vector<std::string> names;
  for (const auto& e : *endpoints) names.push_back(e.name);
  results.Note("startup", subject + ": groups " + Join(groups) + "; endpoints " + Join(names));
  std::vector<double> start_ms, stop_ms;
  for (int i = 0; i < runs; ++i) {
    auto started = host.Start(names);
    if (!started.ok()) {
      results.Note("startup", subject + ": " + started.status().message());
      return false;
    }
    start_ms.push_back(std::chrono::duration<double, std::milli>(*started).count());
    auto stopped = host.Stop();
    if (!stopped.ok()) {
      results.Note("startup", subject + ": " + stopped.status().message());
      return false;
    }
    stop_ms.push_back(std::chrono::duration<double, std::milli>(*stopped).count());
    std::fprintf(stderr, "%-12s run %2d: ready in %7.2f ms, stopped in %7.2f ms\n", subject.c_str(), i, start_ms.back(),
                 stop_ms.back());
  }
  results.Add("startup", subject, "", "groups", static_cast<double>(groups.size()), "");
  results.Add("startup", subject, "", "endpoints", static_cast<double>(names.size()), "");
  results.Add("startup", subject, "", "runs", runs, "");
  results.Add("startup", subject, "", "ready_median_ms", Median(start_ms), "ms");
  results.Add("startup", subject, "", "ready_min_ms", *std::min_element(start_ms.begin(), start_ms.end()), "ms");
  results.Add("startup", subject, "", "ready_max_ms", *std::max_element(start_ms.begin(), start_ms.end()), "ms");
  results.Add("startup", subject, "", "stop_median_ms", Median(stop_ms), "ms");
  return true;
}

// Resident memory idle, under 64 clients, and after the load.
void MeasureMemory(const std::vector<std::string>& groups, std::chrono::milliseconds load_time) {
  Results& results = Results::Get();
  const std::string subject = "memory";
  BenchHost host(groups);
  auto endpoints = host.CheckConfig();
  if (!endpoints.ok() || endpoints->empty()) return;
  std::vector<std::string> names;
  for (const auto& e : *endpoints) names.push_back(e.name);
  if (auto started = host.Start(names); !started.ok()) {
    results.Note("startup", "memory: " + started.status().message());
    return;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ProcessMemory idle = ReadProcessMemory(host.pid());
  results.Add("memory", subject, "idle", "rss_kib", static_cast<double>(idle.rss_kib), "KiB");
  results.Add("memory", subject, "idle", "threads", static_cast<double>(idle.threads), "");

  // Idle again after one call of each kind: what a host that serves now and then keeps resident (the host gives
  // back, after start-up, the file pages only loading touched; calls bring back those they use).
  std::vector<LoadCall> mix = LoadMix(host, *endpoints);
  {
    std::map<std::string, std::unique_ptr<RawClient>> conns;
    for (const LoadCall& c : mix) {
      auto& conn = conns[c.endpoint];
      if (!conn) conn = std::make_unique<RawClient>(host.endpoint(c.endpoint));
      (void)conn->Call(c.method, c.request, nullptr);
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ProcessMemory served = ReadProcessMemory(host.pid());
  results.Add("memory", subject, "idle, served", "rss_kib", static_cast<double>(served.rss_kib), "KiB");
  results.Add("memory", subject, "idle, served", "threads", static_cast<double>(served.threads), "");

  std::vector<std::string> methods;
  for (const auto& c : mix) methods.push_back(c.method);
  results.Note("memory", "host with " + Join(groups) + "; load: 64 clients, each calling in turn " + Join(methods));
  const int clients = 64;
  std::atomic<bool> stop{false};
  std::atomic<int64_t> calls{0}, errors{0};
  std::mutex error_mu;
  std::string first_error;
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] {
      std::map<std::string, std::unique_ptr<RawClient>> conns;
      for (size_t k = static_cast<size_t>(i); !stop.load(std::memory_order_relaxed); ++k) {
        const LoadCall& c = mix[k % mix.size()];
        auto& conn = conns[c.endpoint];
        if (!conn) conn = std::make_unique<RawClient>(host.endpoint(c.endpoint));
        grpc::Status s = conn->Call(c.method, c.request, nullptr);
        // Error answers from a group are answers (e.g. no BIOS serial here); the host refusing or losing the call,
        // or an unknown method, is not.
        auto code = s.error_code();
        if (code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::UNIMPLEMENTED ||
            code == grpc::StatusCode::RESOURCE_EXHAUSTED || code == grpc::StatusCode::DEADLINE_EXCEEDED) {
          if (errors++ == 0) {
            std::lock_guard lock(error_mu);
            first_error = c.method + ": code " + std::to_string(code) + ": " + s.error_message();
          }
        }
        ++calls;
      }
    });
  }
  ProcessMemory peak;
  auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < load_time) {
    ProcessMemory m = ReadProcessMemory(host.pid());
    peak.rss_kib = std::max(peak.rss_kib, m.rss_kib);
    peak.threads = std::max(peak.threads, m.threads);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stop = true;
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (auto& t : threads) t.join();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ProcessMemory after = ReadProcessMemory(host.pid());
  results.Add("memory", subject, "64 clients", "rss_peak_kib", static_cast<double>(peak.rss_kib), "KiB");
  results.Add("memory", subject, "64 clients", "threads_peak", static_cast<double>(peak.threads), "");
  results.Add("memory", subject, "64 clients", "calls_per_s", static_cast<double>(calls.load()) / seconds, "calls/s");
  results.Add("memory", subject, "after load", "rss_kib", static_cast<double>(after.rss_kib), "KiB");
  results.Add("memory", subject, "after load", "hwm_kib", static_cast<double>(after.hwm_kib), "KiB");
  if (errors.load() > 0) {
    results.Note("memory", std::to_string(errors.load()) +
                               " calls of the load were not answered by a group; first: " + first_error);
  }
  std::fprintf(stderr,
               "memory: idle %lld KiB, idle after one call of each kind %lld KiB, under load %lld KiB "
               "(%.0f calls/s), after %lld KiB\n",
               static_cast<long long>(idle.rss_kib), static_cast<long long>(served.rss_kib),
               static_cast<long long>(peak.rss_kib), static_cast<double>(calls.load()) / seconds,
               static_cast<long long>(after.rss_kib));
  if (auto stopped = host.Stop(); !stopped.ok()) results.Note("memory", stopped.status().message());
}

int Main(int argc, char** argv) {
  InstallCleanupHandlers();
  CommonFlags flags = ParseCommonFlags(&argc, argv);
  const int runs = flags.quick ? 3 : 10;
  Results& results = Results::Get();

  std::vector<std::string> built, missing;
  for (const auto& g : AllGroups()) (GroupLibrary(g).empty() ? missing : built).push_back(g);
  if (!missing.empty()) {
    results.Note("startup", "groups not built, so not part of the start-up measured: " + Join(missing));
  }
  MeasureStartup("echo", {"echo"}, runs);
  if (!built.empty()) MeasureStartup("groups", built, runs);
  std::vector<std::string> memory_groups = built;
  memory_groups.push_back("echo");
  MeasureMemory(memory_groups, std::chrono::milliseconds(flags.quick ? 500 : 2000));
  return results.Write() ? 0 : 1;
}

}  // namespace
}  // namespace csi_proxy::bench

int main(int argc, char** argv) { return csi_proxy::bench::Main(argc, argv); }

// Turns the records of the benchmark programs (results.h) into the report: a Markdown page for people and a
// JSON file for the next run to compare with. Every ratio has a stable key; when the previous report's JSON is
// given, each ratio and value is shown next to its previous value, so a regression is visible at a glance.
//
//   bench_report --results-dir DIR --markdown FILE --json FILE [--previous FILE]
//                [--commit SHA] [--build-type TYPE] [--command TEXT] [--load-before TEXT]
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace {

namespace fs = std::filesystem;

using Key = std::tuple<std::string, std::string, std::string, std::string>;  // section, subject, param, metric

struct Data {
  std::map<Key, double> values;
  std::map<std::string, std::vector<std::string>> notes;  // by section
  std::vector<std::string> subjects_in_order;             // methods section, first-seen order
};

std::vector<std::string> Split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : line) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  out.push_back(cur);
  return out;
}

void Load(const fs::path& file, Data& data) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    auto f = Split(line, '\t');
    if (f.size() == 7 && f[0] == "R") {
      data.values[{f[1], f[2], f[3], f[4]}] = std::strtod(f[5].c_str(), nullptr);
      if (f[1] == "methods" && std::find(data.subjects_in_order.begin(), data.subjects_in_order.end(), f[2]) ==
                                   data.subjects_in_order.end()) {
        data.subjects_in_order.push_back(f[2]);
      }
    } else if (f.size() == 3 && f[0] == "N") {
      auto& notes = data.notes[f[1]];
      if (std::find(notes.begin(), notes.end(), f[2]) == notes.end()) notes.push_back(f[2]);
    }
  }
}

std::optional<double> Get(const Data& d, const std::string& section, const std::string& subject,
                          const std::string& param, const std::string& metric) {
  auto it = d.values.find({section, subject, param, metric});
  if (it == d.values.end()) return std::nullopt;
  return it->second;
}

std::string Fmt(std::optional<double> v, int precision = 1) {
  if (!v) return "–";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", precision, *v);
  return buf;
}

std::string FmtRatio(std::optional<double> v) { return v ? Fmt(v, 2) + "×" : "–"; }

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}

std::string Trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return Trim(line);
}

struct Machine {
  std::string cpu_model, kernel, memory, load_before, load_after;
  long nproc = 0;
};

Machine ReadMachine(const std::string& load_before) {
  Machine m;
  m.nproc = sysconf(_SC_NPROCESSORS_ONLN);
  std::ifstream cpu("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpu, line)) {
    if (line.rfind("model name", 0) == 0) {
      m.cpu_model = Trim(line.substr(line.find(':') + 1));
      break;
    }
  }
  std::ifstream mem("/proc/meminfo");
  while (std::getline(mem, line)) {
    if (line.rfind("MemTotal:", 0) == 0) {
      double kib = std::strtod(line.c_str() + 9, nullptr);
      m.memory = Fmt(kib / 1024 / 1024, 1) + " GiB";
      break;
    }
  }
  utsname u{};
  if (uname(&u) == 0) m.kernel = std::string(u.sysname) + " " + u.release + " " + u.machine;
  m.load_before = load_before;
  auto parts = Split(ReadFirstLine("/proc/loadavg"), ' ');
  if (parts.size() >= 3) m.load_after = parts[0] + " " + parts[1] + " " + parts[2];
  return m;
}

// One line of the summary: a ratio (dimensionless) or a value with a unit.
struct Metric {
  std::string key;
  double value;
  std::string unit;     // "x" for ratios
  std::string meaning;  // for ratios: which way is better
};

std::map<std::string, double> ReadPrevious(const std::string& path) {
  std::map<std::string, double> out;
  if (path.empty()) return out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    auto k = line.find("\"key\": \"");
    auto v = line.find("\"value\": ");
    if (k == std::string::npos || v == std::string::npos) continue;
    k += 8;
    auto end = line.find('"', k);
    out[line.substr(k, end - k)] = std::strtod(line.c_str() + v + 9, nullptr);
  }
  return out;
}

std::string Change(const std::map<std::string, double>& previous, const Metric& m) {
  auto it = previous.find(m.key);
  if (it == previous.end() || it->second == 0) return "–";
  double pct = (m.value / it->second - 1) * 100;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%+.0f%%", pct);
  return buf;
}

std::string PrevText(const std::map<std::string, double>& previous, const Metric& m) {
  auto it = previous.find(m.key);
  if (it == previous.end()) return "–";
  return Fmt(it->second, m.unit == "x" ? 2 : 1);
}

const std::vector<std::pair<std::string, std::string>> kServers = {
    {"host", "csi-proxy host → C ABI → echo group library"},
    {"host-metrics", "the same host with Prometheus metrics on (`metrics_address`)"},
    {"host-blocking", "csi-proxy host → C ABI → a library built against the plain C header (no NONBLOCKING flag)"},
    {"grpc-sync", "plain gRPC C++ server, generated sync service, 16 threads"},
    {"grpc-callback", "plain gRPC C++ server, generated callback service"},
    {"grpc-callback-fd", "the same, taking its connections as the host does (AddInsecureChannelFromFd)"},
};
const std::vector<std::string> kConcurrency = {"1 client", "16 clients", "64 clients"};
const std::vector<std::pair<std::string, std::string>> kSteps = {
    {"list_disks", "list disks (ListDiskIDs / lsblk)"},
    {"partition", "partition (PartitionDisk / sfdisk)"},
    {"list_volumes", "list volumes (ListVolumesOnDisk / lsblk)"},
    {"check_format", "check format (IsVolumeFormatted / blkid)"},
    {"format", "format (FormatVolume / mkfs.ext4)"},
    {"mount", "mount (MountVolume / mount)"},
    {"unmount", "unmount (UnmountVolume / umount)"},
    {"total", "**whole sequence**"},
};

const std::vector<std::pair<std::string, std::string>> kIsolationSubjects = {
    {"filesystem", "filesystem `/v1.Filesystem/PathExists` (kubelet dir)"},
    {"echo", "echo `/v1.Echo/Echo`"},
};
const std::vector<std::pair<std::string, std::string>> kIsolationConditions = {
    {"idle", "idle host"},
    {"starved", "blocker group's budget exhausted"},
    {"reloading", "blocker group reloaded back to back"},
};

// The metadata methods issue 12 wants answered from memory: at most 2x a trivial call, flat from 1 to 64 disks.
bool IsInventoryMethod(const std::string& method) {
  for (const char* m :
       {"/v1.Disk/ListDiskIDs", "/v1.Disk/ListDiskLocations", "/v1.Disk/GetDiskStats", "/v1.Disk/GetDiskState",
        "/v1.Volume/ListVolumesOnDisk", "/v1.Volume/GetDiskNumberFromVolumeID"}) {
    if (method == m) return true;
  }
  return false;
}

// The best plain generated gRPC server of the run for one figure: the lowest latency or the highest throughput of
// the sync and the callback server (the issue holds the host against the best one per figure).
std::optional<double> BestPlain(const Data& d, const std::string& param, const std::string& metric) {
  std::optional<double> best;
  for (const char* base : {"grpc-sync", "grpc-callback"}) {
    auto v = Get(d, "overhead", base, param, metric);
    if (!v) continue;
    bool higher_is_better = metric == "calls_per_s";
    if (!best || (higher_is_better ? *v > *best : *v < *best)) best = v;
  }
  return best;
}

std::vector<Metric> Ratios(const Data& d) {
  std::vector<Metric> r;
  auto ratio = [&](const std::string& key, std::optional<double> a, std::optional<double> b,
                   const std::string& meaning) {
    if (a && b && *b != 0) r.push_back({key, *a / *b, "x", meaning});
  };
  for (const auto& base : {std::string("grpc-sync"), std::string("grpc-callback")}) {
    std::string tag = base == "grpc-sync" ? "sync" : "callback";
    for (const char* p : {"p50_us", "p99_us"}) {
      std::string pname = std::string(p).substr(0, 3);
      ratio("overhead.latency_" + pname + ".host_vs_grpc_" + tag, Get(d, "overhead", "host", "1 client", p),
            Get(d, "overhead", base, "1 client", p),
            "latency, 1 client: host ÷ plain gRPC " + tag + "; lower is better, 1.00 = no overhead");
    }
    for (const auto& c : kConcurrency) {
      std::string n = c.substr(0, c.find(' '));
      ratio("overhead.throughput_" + n + ".host_vs_grpc_" + tag, Get(d, "overhead", "host", c, "calls_per_s"),
            Get(d, "overhead", base, c, "calls_per_s"),
            "calls/s with " + c + ": host ÷ plain gRPC " + tag + "; higher is better, 1.00 = same");
    }
  }
  // A method without the NONBLOCKING flag (a library built against the plain C header) and the example's
  // NONBLOCKING Echo, each against the best plain server of the run (issue 25).
  for (const auto& [id, tag] : {std::pair{"host-blocking", "host_blocking"}, std::pair{"host", "host"}}) {
    for (const char* p : {"p50_us", "p99_us"}) {
      std::string pname = std::string(p).substr(0, 3);
      ratio("overhead.latency_" + pname + "." + tag + "_vs_best_grpc", Get(d, "overhead", id, "1 client", p),
            BestPlain(d, "1 client", p),
            std::string("latency, 1 client: ") + id + " ÷ the best plain gRPC server; lower is better");
    }
    for (const auto& c : kConcurrency) {
      std::string n = c.substr(0, c.find(' '));
      ratio("overhead.throughput_" + n + "." + tag + "_vs_best_grpc", Get(d, "overhead", id, c, "calls_per_s"),
            BestPlain(d, c, "calls_per_s"),
            "calls/s with " + c + ": " + id + " ÷ the best plain gRPC server; higher is better");
    }
  }
  ratio("overhead.latency_p50.metrics_on_vs_off", Get(d, "overhead", "host-metrics", "1 client", "p50_us"),
        Get(d, "overhead", "host", "1 client", "p50_us"),
        "latency, 1 client: host with metrics ÷ without; lower is better, 1.00 = recording costs nothing");
  ratio("overhead.throughput_64.metrics_on_vs_off", Get(d, "overhead", "host-metrics", "64 clients", "calls_per_s"),
        Get(d, "overhead", "host", "64 clients", "calls_per_s"),
        "calls/s with 64 clients: host with metrics ÷ without; higher is better, 1.00 = same");
  ratio("overhead.rss_idle.host_vs_grpc_sync", Get(d, "overhead", "host", "idle", "rss_kib"),
        Get(d, "overhead", "grpc-sync", "idle", "rss_kib"),
        "idle resident memory: host ÷ plain gRPC sync; lower is better");
  for (const auto& [step, _] : kSteps) {
    ratio("staging." + step + ".proxy_vs_scripts", Get(d, "staging", "proxy", "", step + "_ms"),
          Get(d, "staging", "scripts", "", step + "_ms"),
          "staging step " + step + ": csi-proxy ÷ separate tool processes; lower is better");
  }
  for (const auto& [id, label] : kIsolationSubjects) {
    for (const char* p : {"p50_us", "p99_us"}) {
      std::string pname = std::string(p).substr(0, 3);
      for (const char* c : {"starved", "reloading"}) {
        ratio("isolation." + id + "." + pname + "." + c + "_vs_idle", Get(d, "isolation", id, c, p),
              Get(d, "isolation", id, "idle", p),
              label + " " + pname + ": " + c + " ÷ idle host; goal about 1.00 (calls of other groups not slowed)");
      }
    }
  }
  for (const auto& subject : d.subjects_in_order) {
    auto at64 = Get(d, "methods", subject, "disks=64", "p50_us");
    auto at1 = Get(d, "methods", subject, "disks=1", "p50_us");
    auto code = Get(d, "methods", subject, "disks=1", "status_code");
    if (code && *code != 0) continue;  // error answers are not a method's cost
    std::string method = subject.substr(subject.find(' ') + 1);
    ratio("methods." + method + ".p50_64_vs_1_disks", at64, at1,
          std::string("growth of p50 latency from 1 to 64 attached disks; 1.00 = flat") +
              (IsInventoryMethod(method) ? "; goal at most 1.20 (issue 12)" : ""));
    // Against the trivial call measured through the same host (the group's program loads the filesystem group).
    const std::string group = subject.substr(0, subject.find(' '));
    if (IsInventoryMethod(method)) {
      ratio("methods." + method + ".p50_vs_trivial_64_disks", at64,
            Get(d, "methods", group + " /v1.Filesystem/PathExists", "disks=64", "p50_us"),
            "p50 with 64 disks ÷ PathExists through the same host; goal at most 2.00 (issue 12)");
    }
  }
  return r;
}

std::vector<Metric> Values(const Data& d) {
  std::vector<Metric> v;
  auto add = [&](const std::string& key, std::optional<double> x, const std::string& unit) {
    if (x) v.push_back({key, *x, unit, ""});
  };
  for (const auto& [id, _] : kServers) {
    add("overhead." + id + ".p50_us", Get(d, "overhead", id, "1 client", "p50_us"), "us");
    add("overhead." + id + ".p99_us", Get(d, "overhead", id, "1 client", "p99_us"), "us");
    for (const auto& c : kConcurrency) {
      add("overhead." + id + ".calls_per_s_" + c.substr(0, c.find(' ')), Get(d, "overhead", id, c, "calls_per_s"),
          "calls/s");
    }
    add("overhead." + id + ".rss_idle_kib", Get(d, "overhead", id, "idle", "rss_kib"), "KiB");
    add("overhead." + id + ".switches_per_call_1", Get(d, "overhead", id, "1 client", "switches_per_call"), "");
  }
  for (const auto& subject : d.subjects_in_order) {
    std::string method = subject.substr(subject.find(' ') + 1);
    for (const char* disks : {"disks=1", "disks=64"}) {
      add("methods." + method + ".p50_us." + disks, Get(d, "methods", subject, disks, "p50_us"), "us");
    }
  }
  for (const auto& [id, _] : kIsolationSubjects) {
    add("isolation." + id + ".p50_us.idle", Get(d, "isolation", id, "idle", "p50_us"), "us");
    for (const char* c : {"starved", "reloading"}) {
      add("isolation." + id + ".failed_calls." + c, Get(d, "isolation", id, c, "failed_calls"), "calls");
    }
  }
  add("isolation.blocker.resource_exhausted", Get(d, "isolation", "blocker", "starved", "resource_exhausted"), "calls");
  add("isolation.blocker.reloads", Get(d, "isolation", "blocker", "reloading", "reloads"), "reloads");
  add("staging.proxy.total_ms", Get(d, "staging", "proxy", "", "total_ms"), "ms");
  add("staging.scripts.total_ms", Get(d, "staging", "scripts", "", "total_ms"), "ms");
  for (const char* s : {"echo", "groups"}) {
    add(std::string("startup.") + s + ".ready_median_ms", Get(d, "startup", s, "", "ready_median_ms"), "ms");
  }
  add("memory.idle_kib", Get(d, "memory", "memory", "idle", "rss_kib"), "KiB");
  add("memory.idle_served_kib", Get(d, "memory", "memory", "idle, served", "rss_kib"), "KiB");
  add("memory.load_peak_kib", Get(d, "memory", "memory", "64 clients", "rss_peak_kib"), "KiB");
  return v;
}

// The goals of the call path (issues 12 and 25), each as a ratio against its baseline next to the goal.
struct Target {
  std::string what;
  std::optional<double> value;
  enum Bound { kAtMost, kAtLeast, kBelow } bound;
  double goal;
  bool Met() const { return bound == kAtMost ? *value <= goal : bound == kAtLeast ? *value >= goal : *value < goal; }
};

std::optional<double> Divide(std::optional<double> a, std::optional<double> b) {
  if (!a || !b || *b == 0) return std::nullopt;
  return *a / *b;
}

std::vector<Target> CallPathTargets(const Data& d) {
  auto vs_sync = [&](const std::string& param, const std::string& metric) {
    return Divide(Get(d, "overhead", "host", param, metric), Get(d, "overhead", "grpc-sync", param, metric));
  };
  // Threads of the idle host with every group, against the 26 it had before the hand-off was removed.
  constexpr double kThreadsBefore = 26;
  auto blocking_vs_best = [&](const std::string& param, const std::string& metric) {
    return Divide(Get(d, "overhead", "host-blocking", param, metric), BestPlain(d, param, metric));
  };
  auto isolated_vs_host = [&](const std::string& param, const std::string& metric) {
    return Divide(Get(d, "overhead", "host-isolated", param, metric), Get(d, "overhead", "host", param, metric));
  };
  return {
      {"echo p50, 1 client: host ÷ plain gRPC sync", vs_sync("1 client", "p50_us"), Target::kAtMost, 1.10},
      {"echo p99, 1 client: host ÷ plain gRPC sync", vs_sync("1 client", "p99_us"), Target::kAtMost, 1.10},
      {"echo calls/s, 16 clients: host ÷ plain gRPC sync", vs_sync("16 clients", "calls_per_s"), Target::kAtLeast,
       0.95},
      {"echo calls/s, 64 clients: host ÷ plain gRPC sync", vs_sync("64 clients", "calls_per_s"), Target::kAtLeast,
       0.95},
      // Issue 25: a method without the NONBLOCKING flag, against the best plain server per figure.
      {"blocking method p50, 1 client: host ÷ best plain gRPC", blocking_vs_best("1 client", "p50_us"), Target::kAtMost,
       1.15},
      {"blocking method p99, 1 client: host ÷ best plain gRPC", blocking_vs_best("1 client", "p99_us"), Target::kAtMost,
       1.15},
      {"blocking method calls/s, 16 clients: host ÷ best plain gRPC", blocking_vs_best("16 clients", "calls_per_s"),
       Target::kAtLeast, 0.90},
      {"blocking method calls/s, 64 clients: host ÷ best plain gRPC", blocking_vs_best("64 clients", "calls_per_s"),
       Target::kAtLeast, 0.90},
      // Issue 25: the echo group isolated (its library in csi-proxy-runner) against the same call in process.
      {"isolated echo p50, 1 client: isolated ÷ in process", isolated_vs_host("1 client", "p50_us"), Target::kAtMost,
       1.30},
      {"isolated echo calls/s, 16 clients: isolated ÷ in process", isolated_vs_host("16 clients", "calls_per_s"),
       Target::kAtLeast, 0.80},
      // Both idle after serving calls (the plain server after its warm-up, the host after one call of each kind).
      {"idle RSS, host with every group ÷ plain gRPC sync",
       Divide(Get(d, "memory", "memory", "idle, served", "rss_kib"),
              Get(d, "overhead", "grpc-sync", "idle", "rss_kib")),
       Target::kAtMost, 1.20},
      {"idle threads, host with every group ÷ 26 (the count before)",
       Divide(Get(d, "memory", "memory", "idle", "threads"), kThreadsBefore), Target::kBelow, 1.00},
  };
}

void WriteTargets(std::ostream& md, const Data& d) {
  md << "## Call-path targets\n\n"
     << "The goals of the call path (docs/performance.md, \"Call path\"), against the plain generated gRPC C++ "
        "server with the same thread count in the same run.\n\n| target | ratio | goal | met |\n|---|---:|---:|---|\n";
  for (const auto& t : CallPathTargets(d)) {
    const char* bound = t.bound == Target::kAtMost ? "≤ " : t.bound == Target::kAtLeast ? "≥ " : "< ";
    std::string met = !t.value ? "not measured" : t.Met() ? "yes" : "**no**";
    md << "| " << t.what << " | " << (t.value ? Fmt(*t.value, 2) : "–") << " | " << bound << Fmt(t.goal, 2) << " | "
       << met << " |\n";
  }
  md << "\n";
}

std::string Arg(int argc, char** argv, const std::string& name) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (argv[i] == name) return argv[i + 1];
  }
  return {};
}

void Notes(std::ostream& md, const Data& d, const std::string& section) {
  auto it = d.notes.find(section);
  if (it == d.notes.end()) return;
  md << "\n";
  for (const auto& n : it->second) md << "- " << n << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = Arg(argc, argv, "--results-dir");
  std::string md_path = Arg(argc, argv, "--markdown");
  std::string json_path = Arg(argc, argv, "--json");
  if (dir.empty() || md_path.empty() || json_path.empty()) {
    std::cerr << "usage: bench_report --results-dir DIR --markdown FILE --json FILE [--previous FILE] [--commit SHA] "
                 "[--build-type TYPE] [--command TEXT] [--load-before TEXT]\n";
    return 2;
  }
  Data d;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().string().ends_with(".records.tsv")) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) Load(f, d);
  const auto previous = ReadPrevious(Arg(argc, argv, "--previous"));
  const Machine machine = ReadMachine(Arg(argc, argv, "--load-before"));
  const std::vector<Metric> ratios = Ratios(d);
  const std::vector<Metric> values = Values(d);
  char when[64];
  std::time_t now = std::time(nullptr);
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  const std::string commit = Arg(argc, argv, "--commit");
  const std::string build_type = Arg(argc, argv, "--build-type");

  std::ostringstream md;
  md << "# csi-proxy benchmark report\n\n"
     << "Generated " << when << " by `" << Arg(argc, argv, "--command") << "` from commit `" << commit << "` ("
     << build_type << " build). Method and interpretation: docs/performance.md.\n\n";
  md << "## Machine\n\n| | |\n|---|---|\n"
     << "| CPU | " << machine.cpu_model << " |\n| online CPUs (nproc) | " << machine.nproc << " |\n"
     << "| memory | " << machine.memory << " |\n| kernel | " << machine.kernel << " |\n"
     << "| load average before / after the run | " << machine.load_before << " / " << machine.load_after << " |\n\n";

  WriteTargets(md, d);
  md << "## Ratios and values to compare between runs\n\n"
     << "Each line has a stable key; `previous` is the report this run replaced (bench/report/latest.json before "
        "the run).\n\n| key | this run | previous | change | meaning |\n|---|---:|---:|---:|---|\n";
  for (const auto& m : ratios) {
    md << "| `" << m.key << "` | " << Fmt(m.value, 2) << " | " << PrevText(previous, m) << " | " << Change(previous, m)
       << " | " << m.meaning << " |\n";
  }
  for (const auto& m : values) {
    md << "| `" << m.key << "` | " << Fmt(m.value, 1) << " " << m.unit << " | " << PrevText(previous, m) << " | "
       << Change(previous, m) << " | |\n";
  }

  md << "\n## Host overhead: the same Echo handler through csi-proxy and through plain gRPC\n\n";
  if (auto rounds = Get(d, "overhead", "config", "", "rounds")) {
    md << "Each server is a separate process on a Unix socket; " << Fmt(rounds, 0) << " interleaved rounds of "
       << Fmt(Get(d, "overhead", "config", "", "round_ms"), 0) << " ms per server and client count; each client has "
       << "its own connection and calls back to back.\n\n";
  }
  md << "Latency with one client (µs), and the server's context switches per call (all its threads, voluntary and "
        "not):\n\n| server | p50 | p90 | p99 | p99.9 | mean | calls | switches per call "
        "|\n|---|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& [id, label] : kServers) {
    md << "| " << label << " | " << Fmt(Get(d, "overhead", id, "1 client", "p50_us")) << " | "
       << Fmt(Get(d, "overhead", id, "1 client", "p90_us")) << " | "
       << Fmt(Get(d, "overhead", id, "1 client", "p99_us")) << " | "
       << Fmt(Get(d, "overhead", id, "1 client", "p999_us")) << " | "
       << Fmt(Get(d, "overhead", id, "1 client", "mean_us")) << " | "
       << Fmt(Get(d, "overhead", id, "1 client", "samples"), 0) << " | "
       << Fmt(Get(d, "overhead", id, "1 client", "switches_per_call"), 2) << " |\n";
  }
  md << "\nThroughput (calls/s, median of rounds) and latency under load (p50 / p99 µs):\n\n"
     << "| server | 1 client | 16 clients | 64 clients | p50 / p99 at 16 | p50 / p99 at 64 "
        "|\n|---|---:|---:|---:|---:|---:|\n";
  for (const auto& [id, label] : kServers) {
    md << "| " << label;
    for (const auto& c : kConcurrency) md << " | " << Fmt(Get(d, "overhead", id, c, "calls_per_s"), 0);
    for (const char* c : {"16 clients", "64 clients"}) {
      md << " | " << Fmt(Get(d, "overhead", id, c, "p50_us"), 0) << " / "
         << Fmt(Get(d, "overhead", id, c, "p99_us"), 0);
    }
    md << " |\n";
  }
  md << "\nResident memory (KiB) and threads:\n\n| server | idle RSS | peak RSS, 64 clients | threads idle | threads "
        "peak |\n|---|---:|---:|---:|---:|\n";
  for (const auto& [id, label] : kServers) {
    md << "| " << label << " | " << Fmt(Get(d, "overhead", id, "idle", "rss_kib"), 0) << " | "
       << Fmt(Get(d, "overhead", id, "64 clients", "rss_peak_kib"), 0) << " | "
       << Fmt(Get(d, "overhead", id, "idle", "threads"), 0) << " | "
       << Fmt(Get(d, "overhead", id, "64 clients", "threads_peak"), 0) << " |\n";
  }
  Notes(md, d, "overhead");

  md << "\n## Isolation: calls of an untouched group while another group is starved or reloaded\n\n";
  if (auto rounds = Get(d, "isolation", "config", "", "rounds")) {
    md << "One client calls each untouched group in turn, back to back, each on its own connection; " << Fmt(rounds, 0)
       << " interleaved rounds of " << Fmt(Get(d, "isolation", "config", "", "round_ms"), 0)
       << " ms per condition. The other group is the blocker test group, budget "
       << Fmt(Get(d, "isolation", "config", "", "blocker_workers"), 0) << " workers + "
       << Fmt(Get(d, "isolation", "config", "", "blocker_max_queued_calls"), 0)
       << " queued calls. Goal: every ratio about 1.00 and no failed call.\n\n"
       << "| call | condition | p50 µs | p90 µs | p99 µs | calls | failed | p50 ÷ idle | p99 ÷ idle |\n"
       << "|---|---|---:|---:|---:|---:|---:|---:|---:|\n";
    for (const auto& [id, label] : kIsolationSubjects) {
      if (!Get(d, "isolation", id, "idle", "p50_us")) continue;
      for (const auto& [c, clabel] : kIsolationConditions) {
        auto ratio = [&](const char* p) -> std::optional<double> {
          auto a = Get(d, "isolation", id, c, p);
          auto b = Get(d, "isolation", id, "idle", p);
          if (!a || !b || *b == 0 || c == "idle") return std::nullopt;
          return *a / *b;
        };
        md << "| " << label << " | " << clabel << " | " << Fmt(Get(d, "isolation", id, c, "p50_us")) << " | "
           << Fmt(Get(d, "isolation", id, c, "p90_us")) << " | " << Fmt(Get(d, "isolation", id, c, "p99_us")) << " | "
           << Fmt(Get(d, "isolation", id, c, "samples"), 0) << " | "
           << Fmt(Get(d, "isolation", id, c, "failed_calls"), 0) << " | " << FmtRatio(ratio("p50_us")) << " | "
           << FmtRatio(ratio("p99_us")) << " |\n";
      }
    }
    md << "\nStarved: each round " << Fmt(Get(d, "isolation", "config", "", "blocker_workers"), 0) << " + "
       << Fmt(Get(d, "isolation", "config", "", "blocker_max_queued_calls"), 0)
       << " Block calls that ignore cancellation hold the blocker group's workers and queue (checked on the admin "
       << "socket before measuring); meanwhile a second client asked the group for more: "
       << Fmt(Get(d, "isolation", "blocker", "starved", "resource_exhausted"), 0) << " of "
       << Fmt(Get(d, "isolation", "blocker", "starved", "extra_calls"), 0)
       << " extra calls were answered RESOURCE_EXHAUSTED naming the group ("
       << Fmt(Get(d, "isolation", "blocker", "starved", "other_answers"), 0) << " otherwise; the host counted "
       << Fmt(Get(d, "isolation", "blocker", "starved", "host_refused"), 0) << " refusals); "
       << Fmt(Get(d, "isolation", "blocker", "starved", "rounds_skipped"), 0) << " rounds skipped.\n\n"
       << "Reloading: " << Fmt(Get(d, "isolation", "blocker", "reloading", "reloads"), 0)
       << " reloads of the blocker group (library switched between two copies, tag changed; "
       << Fmt(Get(d, "isolation", "blocker", "reloading", "reloads_per_s"), 1) << " per second), "
       << "from SIGHUP to the \"reload finished\" line median "
       << Fmt(Get(d, "isolation", "blocker", "reloading", "reload_p50_ms"), 2) << " ms, max "
       << Fmt(Get(d, "isolation", "blocker", "reloading", "reload_max_ms"), 1)
       << " ms (the host's own count, whole ms: max "
       << Fmt(Get(d, "isolation", "blocker", "reloading", "host_reload_max_ms"), 0) << "); "
       << Fmt(Get(d, "isolation", "blocker", "reloading", "refused_reloads"), 0) << " did not apply, "
       << Fmt(Get(d, "isolation", "blocker", "reloading", "wrong_instance"), 0)
       << " times the group's Tag did not answer the new instance right after the reload.\n\n"
       << "CPU used during each condition's rounds, percent of one core (the host; the bench program with its "
       << "client, fill and reload threads): idle " << Fmt(Get(d, "isolation", "cpu", "idle", "host_pct"), 0) << " / "
       << Fmt(Get(d, "isolation", "cpu", "idle", "bench_pct"), 0) << ", starved "
       << Fmt(Get(d, "isolation", "cpu", "starved", "host_pct"), 0) << " / "
       << Fmt(Get(d, "isolation", "cpu", "starved", "bench_pct"), 0) << ", reloading "
       << Fmt(Get(d, "isolation", "cpu", "reloading", "host_pct"), 0) << " / "
       << Fmt(Get(d, "isolation", "cpu", "reloading", "bench_pct"), 0) << ".\n";
  }
  Notes(md, d, "isolation");

  md << "\n## Per-method latency through the real socket, by attached disks\n\n"
     << "p50 / p99 in µs, one client, each method called back to back (Google Benchmark, min time per point). "
     << "`disks=N` is the number of loop devices the benchmark attached; the machine's other disks (and those "
     << "other programs attached meanwhile) come on top: see `visible disks` (entries of /sys/block with a size) "
     << "and `entries in /sys/block` (including loop devices with nothing attached).\n\n";
  const std::vector<std::string> disk_params = {"disks=1", "disks=8", "disks=32", "disks=64", "disks=0"};
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;  // group -> its subjects, in order
  for (const auto& subject : d.subjects_in_order) {
    std::string group = subject.substr(0, subject.find(' '));
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == group; });
    if (it == groups.end()) it = groups.insert(groups.end(), {group, {}});
    it->second.push_back(subject);
  }
  for (const auto& [group, subjects] : groups) {
    std::vector<std::string> cols;
    for (const auto& p : disk_params) {
      if (Get(d, "methods", subjects.front(), p, "p50_us")) cols.push_back(p);
    }
    md << "\n### " << group << "\n\n| method |";
    for (const auto& c : cols) md << " " << c << " |";
    md << "\n|---|";
    for (size_t i = 0; i < cols.size(); ++i) md << "---:|";
    md << "\n";
    for (const auto& subject : subjects) {
      md << "| `" << subject.substr(subject.find(' ') + 1) << "`";
      auto code = Get(d, "methods", subject, cols.empty() ? "" : cols[0], "status_code");
      if (code && *code != 0) md << " (error answer, see notes)";
      md << " |";
      for (const auto& c : cols) {
        md << " " << Fmt(Get(d, "methods", subject, c, "p50_us")) << " / "
           << Fmt(Get(d, "methods", subject, c, "p99_us")) << " |";
      }
      md << "\n";
    }
    md << "| visible disks |";
    for (const auto& c : cols) md << " " << Fmt(Get(d, "methods", subjects.front(), c, "visible_disks"), 0) << " |";
    md << "\n| entries in /sys/block |";
    for (const auto& c : cols) md << " " << Fmt(Get(d, "methods", subjects.front(), c, "block_entries"), 0) << " |";
    md << "\n";
  }
  Notes(md, d, "methods");

  md << "\n## Staging a new disk: csi-proxy vs. separate tool processes\n\n";
  if (Get(d, "staging", "proxy", "", "total_ms") || Get(d, "staging", "scripts", "", "total_ms")) {
    md << "Median over " << Fmt(Get(d, "staging", "config", "", "repetitions"), 0)
       << " repetitions of each sequence (randomly interleaved), a fresh 256 MiB loop device each time; ms.\n\n"
       << "| step | csi-proxy | scripts | ratio |\n|---|---:|---:|---:|\n";
    for (const auto& [step, label] : kSteps) {
      auto a = Get(d, "staging", "proxy", "", step + "_ms");
      auto b = Get(d, "staging", "scripts", "", step + "_ms");
      md << "| " << label << " | " << Fmt(a, 2) << " | " << Fmt(b, 2) << " | "
         << FmtRatio(a && b && *b != 0 ? std::optional<double>(*a / *b) : std::nullopt) << " |\n";
    }
  }
  Notes(md, d, "staging");

  md << "\n## Start-up and memory\n\n| configuration | groups | endpoints | ready: median (min–max) ms | stop ms |\n"
     << "|---|---:|---:|---:|---:|\n";
  for (const char* s : {"echo", "groups"}) {
    if (!Get(d, "startup", s, "", "ready_median_ms")) continue;
    md << "| " << (std::string(s) == "echo" ? "echo group only" : "every built API group") << " | "
       << Fmt(Get(d, "startup", s, "", "groups"), 0) << " | " << Fmt(Get(d, "startup", s, "", "endpoints"), 0) << " | "
       << Fmt(Get(d, "startup", s, "", "ready_median_ms"), 1) << " ("
       << Fmt(Get(d, "startup", s, "", "ready_min_ms"), 1) << "–" << Fmt(Get(d, "startup", s, "", "ready_max_ms"), 1)
       << ") | " << Fmt(Get(d, "startup", s, "", "stop_median_ms"), 1) << " |\n";
  }
  Notes(md, d, "startup");
  if (Get(d, "memory", "memory", "idle", "rss_kib")) {
    md << "\nResident memory of the host with every built group and the echo group (KiB):\n\n"
       << "| idle after start | idle after one call of each kind | peak under 64 clients | after the load | "
          "threads idle / peak | calls/s during the load |\n"
       << "|---:|---:|---:|---:|---:|---:|\n| " << Fmt(Get(d, "memory", "memory", "idle", "rss_kib"), 0) << " | "
       << Fmt(Get(d, "memory", "memory", "idle, served", "rss_kib"), 0) << " | "
       << Fmt(Get(d, "memory", "memory", "64 clients", "rss_peak_kib"), 0) << " | "
       << Fmt(Get(d, "memory", "memory", "after load", "rss_kib"), 0) << " | "
       << Fmt(Get(d, "memory", "memory", "idle", "threads"), 0) << " / "
       << Fmt(Get(d, "memory", "memory", "64 clients", "threads_peak"), 0) << " | "
       << Fmt(Get(d, "memory", "memory", "64 clients", "calls_per_s"), 0) << " |\n";
  }
  Notes(md, d, "memory");

  std::ofstream(md_path) << md.str();

  std::ostringstream js;
  js << "{\n  \"generated\": \"" << when << "\",\n  \"commit\": \"" << Escape(commit) << "\",\n  \"build_type\": \""
     << Escape(build_type) << "\",\n  \"machine\": {\"cpu\": \"" << Escape(machine.cpu_model)
     << "\", \"nproc\": " << machine.nproc << ", \"memory\": \"" << machine.memory << "\", \"kernel\": \""
     << Escape(machine.kernel) << "\", \"load_before\": \"" << Escape(machine.load_before) << "\", \"load_after\": \""
     << machine.load_after << "\"},\n  \"ratios\": [\n";
  for (size_t i = 0; i < ratios.size(); ++i) {
    js << "    {\"key\": \"" << Escape(ratios[i].key) << "\", \"value\": " << Fmt(ratios[i].value, 4)
       << ", \"meaning\": \"" << Escape(ratios[i].meaning) << "\"}" << (i + 1 < ratios.size() ? "," : "") << "\n";
  }
  js << "  ],\n  \"values\": [\n";
  for (size_t i = 0; i < values.size(); ++i) {
    js << "    {\"key\": \"" << Escape(values[i].key) << "\", \"value\": " << Fmt(values[i].value, 3)
       << ", \"unit\": \"" << values[i].unit << "\"}" << (i + 1 < values.size() ? "," : "") << "\n";
  }
  js << "  ],\n  \"records\": [\n";
  size_t n = 0;
  for (const auto& [k, v] : d.values) {
    const auto& [section, subject, param, metric] = k;
    js << "    {\"section\": \"" << Escape(section) << "\", \"subject\": \"" << Escape(subject) << "\", \"param\": \""
       << Escape(param) << "\", \"metric\": \"" << Escape(metric) << "\", \"number\": " << Fmt(v, 4) << "}"
       << (++n < d.values.size() ? "," : "") << "\n";
  }
  js << "  ],\n  \"notes\": [\n";
  std::vector<std::string> all_notes;
  for (const auto& [section, notes] : d.notes) {
    for (const auto& t : notes) all_notes.push_back(section + ": " + t);
  }
  for (size_t i = 0; i < all_notes.size(); ++i) {
    js << "    \"" << Escape(all_notes[i]) << "\"" << (i + 1 < all_notes.size() ? "," : "") << "\n";
  }
  js << "  ]\n}\n";
  std::ofstream(json_path) << js.str();
  std::cout << "report: " << md_path << "\n        " << json_path << "\n";
  return 0;
}

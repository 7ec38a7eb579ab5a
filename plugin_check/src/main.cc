// csi-proxy-plugin-check: the conformance kit for API-group libraries. It loads a library the way the host does
// (the host's abi/ code) in child processes, and as an isolated group is served (in csi-proxy-runner, through the
// host's RunnerSupervisor), runs the checks of checks.h against it and reports them as a test report: one line per
// check on standard output, optionally JUnit XML, exit status 1 when a check failed.
// docs/plugin-authors.md ("Checking a library") says what each check means.
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>
#include <sstream>

#include "checks.h"
#include "config/trusted_files.h"
#include "isolation.h"
#include "isolation/runner_supervisor.h"
#include "kit_config.h"
#include "process_usage.h"

namespace csi_proxy::plugin_check {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Reported {
  std::string name;
  std::string outcome;  // PASS, FAIL, SKIP
  std::string detail;
  double seconds = 0;
};

struct Options {
  std::string library;
  std::string config;
  std::string group;
  std::string junit;
  std::string log;
  double seconds = 10;
  std::optional<uint64_t> seed;
  std::vector<std::string> only;
  int64_t input = -1;
};

std::string Quote(const std::string& s) { return "'" + s + "'"; }

// The last lines the library's process wrote to the log since `offset`, for a failure's detail.
std::string LogTail(const std::string& path, std::streamoff offset) {
  std::ifstream in(path);
  in.seekg(offset);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line.size() > 300 ? line.substr(0, 300) + "..." : line);
  }
  std::string out;
  for (size_t i = lines.size() > 3 ? lines.size() - 3 : 0; i < lines.size(); ++i) out += " | " + lines[i];
  return out.empty() ? "" : "; its last log lines:" + out;
}

class Kit {
 public:
  Kit(Options options, RunSettings settings) : o_(std::move(options)), s_(std::move(settings)) {}

  // Runs `items` in child processes: one child for all, and after a child that died, a new one from the check
  // after the one it died in, which fails naming the signal and what the library was doing.
  std::vector<Reported> RunBatch(const std::vector<CheckItem>& items, std::vector<std::string>* methods = nullptr) {
    std::vector<std::optional<Reported>> results(items.size());
    std::vector<Clock::time_point> started(items.size(), Clock::now());
    size_t from = 0;
    while (from < items.size()) {
      const std::streamoff log_offset = LogSize();
      results_this_child_ = 0;
      const auto first_deadline = Clock::now() + LoadBudget(s_.config);
      ChildEnd end =
          RunInChild([&](const ChildChannel& channel) { RunChecks(items, from, s_, channel); }, o_.log, first_deadline,
                     [&](const std::string& line, Deadline& deadline) {
                       OnLine(line, deadline, items, results, started, methods);
                     });
      size_t missing = from;
      while (missing < items.size() && results[missing]) ++missing;
      if (missing == items.size()) break;
      // Only after a result of its own: a library that exits with the same status is not taken for the kit.
      if (end.kind == ChildEnd::Kind::kExited && end.code == kExitForAFreshProcess && results_this_child_ > 0) {
        from = missing;
        continue;
      }
      std::string detail = "the library's process " + end.Describe();
      if (end.kind == ChildEnd::Kind::kTimedOut) {
        detail = "no result in time: the library's process hung and was killed";
      }
      if (!end.note.empty()) detail += ", during " + end.note;
      detail += LogTail(o_.log, log_offset);
      results[missing] = Reported{items[missing].name, "FAIL", detail,
                                  std::chrono::duration<double>(Clock::now() - started[missing]).count()};
      from = missing + 1;
    }
    std::vector<Reported> out;
    for (auto& r : results) out.push_back(*r);
    return out;
  }

 private:
  std::streamoff LogSize() const {
    std::error_code ec;
    auto size = fs::file_size(o_.log, ec);
    return ec ? 0 : static_cast<std::streamoff>(size);
  }

  void OnLine(const std::string& line, Deadline& deadline, const std::vector<CheckItem>& items,
              std::vector<std::optional<Reported>>& results, std::vector<Clock::time_point>& started,
              std::vector<std::string>* methods) {
    std::istringstream in(line);
    std::string tag;
    in >> tag;
    if (tag == "M" && methods != nullptr) {
      std::string flags, path;
      in >> flags >> path;
      methods->push_back(flags + " " + path);
    } else if (tag == "S") {
      size_t index = 0;
      long long budget_ms = 0;
      in >> index >> budget_ms;
      if (index < items.size()) started[index] = Clock::now();
      deadline = Clock::now() + std::chrono::milliseconds(budget_ms);
    } else if (tag == "R") {
      size_t index = 0;
      std::string outcome, detail;
      in >> index >> outcome;
      std::getline(in, detail);
      if (!detail.empty() && detail[0] == ' ') detail.erase(0, 1);
      if (index < items.size()) {
        ++results_this_child_;
        results[index] = Reported{items[index].name, outcome, detail,
                                  std::chrono::duration<double>(Clock::now() - started[index]).count()};
      }
      deadline = Clock::now() + LoadBudget(s_.config);
    }
  }

  Options o_;
  RunSettings s_;
  int results_this_child_ = 0;
};

bool Selected(const Options& o, const std::string& name) {
  if (o.only.empty()) return true;
  for (const auto& part : o.only) {
    if (name.find(part) != std::string::npos) return true;
  }
  return false;
}

std::string Xml(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += (static_cast<unsigned char>(c) < 0x20 && c != '\n') ? '?' : c;
    }
  }
  return out;
}

bool WriteJunit(const std::string& path, const std::string& suite, const std::vector<Reported>& all) {
  size_t failures = 0, skipped = 0;
  double total = 0;
  for (const auto& r : all) {
    failures += r.outcome == "FAIL";
    skipped += r.outcome == "SKIP";
    total += r.seconds;
  }
  std::ofstream out(path);
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n<testsuite name=\"" << Xml(suite) << "\" tests=\""
      << all.size() << "\" failures=\"" << failures << "\" skipped=\"" << skipped << "\" time=\"" << total << "\">\n";
  for (const auto& r : all) {
    out << "  <testcase classname=\"" << Xml(suite) << "\" name=\"" << Xml(r.name) << "\" time=\"" << r.seconds << "\"";
    if (r.outcome == "PASS") {
      out << "><system-out>" << Xml(r.detail) << "</system-out></testcase>\n";
    } else if (r.outcome == "SKIP") {
      out << "><skipped message=\"" << Xml(r.detail) << "\"/></testcase>\n";
    } else {
      out << "><failure message=\"" << Xml(r.detail) << "\"/></testcase>\n";
    }
  }
  out << "</testsuite>\n</testsuites>\n";
  return static_cast<bool>(out);
}

int Main(int argc, char** argv) {
  Options o;
  CLI::App app{"csi-proxy-plugin-check: checks an API-group library against the csi-proxy host's ABI and rules"};
  app.add_option("LIB", o.library, "the group library (libcsi-proxy-<group>.so)")->required();
  app.add_option("--config", o.config,
                 "a TOML file: [host] settings, the [groups.<name>] keys, the kit's [check] table");
  app.add_option("--group", o.group, "the group's name, when the file name and the configuration do not say");
  app.add_option("--seconds", o.seconds, "the fuzzing time of the whole run, shared by the fuzzed methods")
      ->check(CLI::Range(0.1, 86400.0));
  app.add_option("--seed", o.seed, "the fuzzing seed (default: a random one, reported)");
  app.add_option("--only", o.only, "run only the checks whose name contains this (repeatable)");
  app.add_option("--input", o.input, "with --seed: run only this input of each fuzz check (the number a failure named)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--junit", o.junit, "also write the report as JUnit XML to this file");
  app.add_option("--log", o.log, "append the library's log (and the host code's) to this file (default: discarded)");
  CLI11_PARSE(app, argc, argv);

  std::error_code ec;
  if (!fs::is_regular_file(o.library, ec)) {
    std::cerr << "csi-proxy-plugin-check: " << o.library << " is not a file\n";
    return 2;
  }
  std::string scratch_template = (fs::temp_directory_path() / "csi-proxy-plugin-check.XXXXXX").string();
  if (mkdtemp(scratch_template.data()) == nullptr) {
    std::cerr << "csi-proxy-plugin-check: cannot create a scratch directory in " << fs::temp_directory_path() << "\n";
    return 2;
  }
  const std::string scratch = scratch_template;
  fs::create_directory(scratch + "/kubelet", ec);
  fs::create_directory(scratch + "/state", ec);
  fs::permissions(scratch + "/state", fs::perms::owner_all, ec);
  if (o.log.empty()) o.log = scratch + "/library.log";
  // The kit checks what a library does, not where it was installed: a build tree's library is checked as it is.
  host::AllowUntrustedFiles();

  int status = 0;
  {
    auto config = LoadKitConfig(o.library, o.config, o.group, scratch);
    if (!config.ok()) {
      std::cerr << "csi-proxy-plugin-check: " << config.status().message() << "\n";
      fs::remove_all(scratch, ec);
      return 2;
    }
    RunSettings settings;
    settings.config = std::move(*config);
    settings.seed = o.seed ? *o.seed : std::random_device{}() * 0x100000001ull + std::random_device{}();
    settings.only_input = o.input;
    const KitConfig& c = settings.config;
    const std::string rerun = "csi-proxy-plugin-check " + o.library +
                              (o.config.empty() ? "" : " --config " + o.config) + " --seed " +
                              std::to_string(settings.seed);
    std::cout << "csi-proxy-plugin-check " << o.library << ": group " << c.group.name << ", seed " << settings.seed
              << "\n";

    std::vector<Reported> all;
    auto print = [&](const std::vector<Reported>& batch) {
      for (const auto& r : batch) {
        std::cout << r.outcome << "  " << r.name << ": " << r.detail << "\n";
        all.push_back(r);
      }
      std::cout.flush();
    };

    std::vector<std::string> methods;
    Kit probe(o, settings);
    std::vector<CheckItem> abi{{CheckKind::kAbiNewest, "abi: newest host", ""}};
    if (Selected(o, "abi: oldest host")) abi.push_back({CheckKind::kAbiOldest, "abi: oldest host", ""});
    auto abi_results = probe.RunBatch(abi, &methods);
    print(abi_results);

    if (abi_results[0].outcome == "PASS") {
      std::vector<CheckItem> lifecycle;
      const std::string reloads = std::to_string(c.reloads) + " reloads";
      for (const CheckItem& item :
           {CheckItem{CheckKind::kInitTwice, "lifecycle: init and shutdown twice", ""},
            CheckItem{CheckKind::kReloadTwice, "lifecycle: reload twice", ""},
            CheckItem{CheckKind::kFdLeak, "leaks: file descriptors across " + reloads, ""},
            CheckItem{CheckKind::kMemoryGrowth, "leaks: resident memory across " + reloads, ""}}) {
        if (Selected(o, item.name)) lifecycle.push_back(item);
      }

      // Per method: what may be called under this configuration, and how.
      std::vector<std::vector<CheckItem>> per_method;
      std::vector<Reported> skipped;
      // The library in the runner: started, each callable method called through it, stopped; in one child.
      std::vector<CheckItem> isolated;
      if (Selected(o, "isolated: start in csi-proxy-runner")) {
        isolated.push_back({CheckKind::kIsolatedStart, "isolated: start in csi-proxy-runner", ""});
      }
      size_t fuzzed = 0;
      for (const std::string& entry : methods) {
        const uint32_t flags = static_cast<uint32_t>(std::stoul(entry.substr(0, entry.find(' '))));
        const std::string path = entry.substr(entry.find(' ') + 1);
        const bool read_only = (flags & CSI_PROXY_METHOD_READ_ONLY) != 0 || c.read_only_methods.count(path) > 0;
        std::vector<CheckItem> items;
        std::string why_not;
        auto skip = c.skip.find(path);
        if (skip == c.skip.end()) skip = c.skip.find(path.substr(path.rfind('/') + 1));
        if (skip != c.skip.end()) {
          why_not = "skipped by [check.skip]: " + skip->second;
        } else if (!read_only && !c.fuzz_mutating) {
          why_not =
              "a mutating method (no CSI_PROXY_METHOD_READ_ONLY): called only with [check] fuzz_mutating = "
              "true, in a configuration that confines the library to scratch directories";
        }
        for (const auto& [kind, prefix] :
             {std::pair{CheckKind::kFuzz, "fuzz "}, std::pair{CheckKind::kDeadline, "deadline "}}) {
          const std::string name = prefix + path;
          if (!Selected(o, name)) continue;
          if (!why_not.empty()) {
            skipped.push_back({name, "SKIP", why_not, 0});
          } else {
            items.push_back({kind, name, path});
            fuzzed += kind == CheckKind::kFuzz;
          }
        }
        if (read_only && why_not.empty() && Selected(o, "concurrent " + path)) {
          items.push_back({CheckKind::kConcurrent, "concurrent " + path, path});
        }
        if (const std::string name = "isolated: calls " + path; Selected(o, name)) {
          if (why_not.empty()) {
            isolated.push_back({CheckKind::kIsolatedCalls, name, path});
          } else {
            skipped.push_back({name, "SKIP", why_not, 0});
          }
        }
        if (!items.empty()) per_method.push_back(std::move(items));
      }
      settings.fuzz_time = std::chrono::milliseconds(
          std::max<int64_t>(100, static_cast<int64_t>(o.seconds * 1000 / std::max<size_t>(1, fuzzed))));
      if (Selected(o, "isolated: stop")) isolated.push_back({CheckKind::kIsolatedStop, "isolated: stop", ""});
      Kit kit(o, settings);
      if (!lifecycle.empty()) print(kit.RunBatch(lifecycle));
      for (const auto& items : per_method) print(kit.RunBatch(items));
      // The runner the host would start for this group: beside the kit, as beside the host (both in bin/).
      const std::string runner = host::RunnerSupervisor::RunnerPath();
      if (!isolated.empty() && !fs::is_regular_file(runner, ec)) {
        std::vector<Reported> not_run;
        for (const auto& item : isolated) {
          not_run.push_back({item.name, "SKIP",
                             "csi-proxy-runner is not beside the kit (" + runner +
                                 "): install the SDK's package, which puts both in the same bin/, or run the "
                                 "kit from a build tree that built the csi-proxy-runner target",
                             0});
        }
        print(not_run);
      } else if (!isolated.empty()) {
        print(kit.RunBatch(isolated));
      }
      print(skipped);
    } else {
      std::cout << "(the library did not load: no further check ran)\n";
    }

    size_t passed = 0, failed = 0, skips = 0;
    for (auto& r : all) {
      passed += r.outcome == "PASS";
      failed += r.outcome == "FAIL";
      skips += r.outcome == "SKIP";
    }
    std::cout << "--\n"
              << all.size() << " checks: " << passed << " passed, " << failed << " failed, " << skips
              << " skipped (seed " << settings.seed << ")\n";
    for (const auto& r : all) {
      if (r.outcome != "FAIL") continue;
      // A fuzz failure names its input: that one input again, with its bytes.
      std::string input;
      if (size_t at = r.detail.find("input #"); at != std::string::npos && r.name.rfind("fuzz ", 0) == 0) {
        input = " --input " + r.detail.substr(at + 7, r.detail.find_first_not_of("0123456789", at + 7) - (at + 7));
      }
      std::cout << "reproduce: " << rerun << " --only " << Quote(r.name) << input << "\n";
    }
    if (!o.junit.empty() && !WriteJunit(o.junit, "csi-proxy-plugin-check " + c.group.name, all)) {
      std::cerr << "csi-proxy-plugin-check: cannot write " << o.junit << "\n";
      status = 2;
    }
    if (failed > 0 && status == 0) status = 1;
  }
  // What a library mounted under the scratch directory stays, and so does the directory: nothing is removed
  // through a mount.
  if (HasMountsUnder(scratch)) {
    std::cerr << "csi-proxy-plugin-check: something is mounted under " << scratch << "; it is left as it is\n";
  } else {
    fs::remove_all(scratch, ec);
  }
  return status;
}

}  // namespace
}  // namespace csi_proxy::plugin_check

int main(int argc, char** argv) { return csi_proxy::plugin_check::Main(argc, argv); }

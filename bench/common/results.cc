// See results.h.
#include "build_tree.h"
#include "results.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace csi_proxy::bench {
namespace {

std::string Clean(std::string s) {
  for (char& c : s) {
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

struct Target {
  std::string section, subject, param;
};

std::map<std::string, Target>& Targets() {
  static std::map<std::string, Target> t;
  return t;
}

double ToMicroseconds(double value, benchmark::TimeUnit unit) {
  switch (unit) {
    case benchmark::kNanosecond:
      return value / 1000.0;
    case benchmark::kMicrosecond:
      return value;
    case benchmark::kMillisecond:
      return value * 1000.0;
    case benchmark::kSecond:
      return value * 1e6;
  }
  return value;
}

class RecordingReporter : public benchmark::ConsoleReporter {
 public:
  RecordingReporter() : ConsoleReporter(OO_Tabular) {}
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.repetitions > 1 && !(run.run_type == Run::RT_Aggregate && run.aggregate_name == "median")) continue;
      auto it = Targets().find(run.run_name.function_name);
      if (it == Targets().end()) continue;
      const Target& t = it->second;
      if (run.error_occurred) {
        Results::Get().Note(t.section, t.subject + " (" + t.param + "): " + run.error_message);
        continue;
      }
      Results::Get().Add(t.section, t.subject, t.param, "time_us",
                         ToMicroseconds(run.GetAdjustedRealTime(), run.time_unit), "us");
      Results::Get().Add(t.section, t.subject, t.param, "iterations", static_cast<double>(run.iterations), "");
      for (const auto& [name, counter] : run.counters) {
        std::string unit;
        if (auto pos = name.rfind('_'); pos != std::string::npos) unit = name.substr(pos + 1);
        Results::Get().Add(t.section, t.subject, t.param, name, counter.value, unit);
      }
    }
  }
};

}  // namespace

Results& Results::Get() {
  static Results r;
  return r;
}

void Results::Add(const std::string& section, const std::string& subject, const std::string& param,
                  const std::string& metric, double value, const std::string& unit) {
  std::ostringstream line;
  line.precision(10);
  line << "R\t" << Clean(section) << '\t' << Clean(subject) << '\t' << Clean(param) << '\t' << Clean(metric) << '\t'
       << value << '\t' << Clean(unit);
  std::lock_guard lock(mu_);
  lines_.push_back(line.str());
}

void Results::Note(const std::string& section, const std::string& text) {
  std::cerr << "note [" << section << "]: " << text << "\n";
  std::lock_guard lock(mu_);
  lines_.push_back("N\t" + Clean(section) + "\t" + Clean(text));
}

bool Results::Write() const {
  std::lock_guard lock(mu_);
  std::ofstream out(path_, std::ios::trunc);
  for (const auto& l : lines_) out << l << '\n';
  out.flush();
  if (!out) {
    std::cerr << "cannot write results to " << path_ << "\n";
    return false;
  }
  std::cerr << "results: " << path_ << "\n";
  return true;
}

CommonFlags ParseCommonFlags(int* argc, char** argv) {
  CommonFlags flags;
  std::string program = argv[0];
  if (auto pos = program.rfind('/'); pos != std::string::npos) program = program.substr(pos + 1);
  // Under the build tree, never in whatever directory the program was started from (a checkout, say).
  std::error_code ignored;
  std::filesystem::create_directories(csi_proxy::testing::BuildDir() + "/bench/results", ignored);
  Results::Get().set_path(csi_proxy::testing::BuildDir() + "/bench/results/" + program + ".records.tsv");
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--results=", 0) == 0) {
      Results::Get().set_path(a.substr(std::strlen("--results=")));
    } else if (a == "--quick") {
      flags.quick = true;
    } else {
      argv[out++] = argv[i];
    }
  }
  *argc = out;
  return flags;
}

void RunRegisteredBenchmarks() {
  RecordingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
}

void ReportAs(const std::string& benchmark_name, const std::string& section, const std::string& subject,
              const std::string& param) {
  Targets()[benchmark_name] = {section, subject, param};
}

}  // namespace csi_proxy::bench

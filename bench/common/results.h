// What a benchmark program found, as records the report tool (bench/report_tool) turns into the report.
//
// A record is one number: section (overhead, methods, staging, startup), subject (what was measured, e.g.
// "/v1.Disk/ListDiskIDs"), param (the condition, e.g. "disks=8"), metric (e.g. "p50_us") and unit. Notes are
// sentences for the report (a group that was skipped and why). The file format is one record per line, tab-
// separated, so that the report tool needs no parser library:
//   R <section> <subject> <param> <metric> <value> <unit>
//   N <section> <text>
#pragma once

#include <benchmark/benchmark.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace csi_proxy::bench {

class Results {
 public:
  static Results& Get();

  void Add(const std::string& section, const std::string& subject, const std::string& param, const std::string& metric,
           double value, const std::string& unit);
  void Note(const std::string& section, const std::string& text);

  // Writes everything recorded so far to the file named by --results (see ParseCommonFlags).
  bool Write() const;
  void set_path(std::string path) { path_ = std::move(path); }

 private:
  mutable std::mutex mu_;
  std::string path_;
  std::vector<std::string> lines_;
};

// Flags every benchmark program takes before Google Benchmark's own:
//   --results=<file>   where the records go (default: <build>/bench/results/<program>.records.tsv)
//   --quick            fewer iterations (a smoke run, e.g. to check that everything works)
// They are removed from argv.
struct CommonFlags {
  bool quick = false;
};
CommonFlags ParseCommonFlags(int* argc, char** argv);

// Runs the registered Google Benchmark benchmarks with a console reporter that also turns each result into
// records (see ReportAs). Repeated runs are reported by their median.
void RunRegisteredBenchmarks();

// Files the results of the Google Benchmark benchmark registered as `benchmark_name` under section/subject/param:
// the real time per iteration becomes metric "time_us", and every user counter a metric of its own name.
void ReportAs(const std::string& benchmark_name, const std::string& section, const std::string& subject,
              const std::string& param);

}  // namespace csi_proxy::bench

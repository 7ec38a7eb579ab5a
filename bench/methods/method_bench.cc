// See method_bench.h.
#include "method_bench.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <unistd.h>

#include <benchmark/benchmark.h>
#include <libfdisk/libfdisk.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <thread>

#include "bench_host.h"
#include "cleanup.h"
#include "loop_devices.h"
#include "partition_table_linux.h"
#include "raw_client.h"
#include "results.h"
#include "run_program.h"
#include "scoped_mount.h"
#include "stats.h"
#include "temp_dir.h"

namespace csi_proxy::bench {
using namespace ::csi_proxy::testing;  // the support library shared with the tests (tests/support)
namespace {

namespace fs = std::filesystem;
constexpr uint64_t kDiskBytes = 64ull << 20;
constexpr uint64_t kVolumeDiskBytes = 256ull << 20;

// One disk with a GPT partition table, one partition and ext4 on it, mounted below the kubelet directory.
// Made with the usual tools (this is set-up, not what is measured).
struct FormattedVolume {
  std::unique_ptr<LoopDevice> disk;
  ScopedMount mount;
};

Status WaitForNode(const std::string& path) {
  for (int i = 0; i < 400; ++i) {
    if (fs::exists(path)) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return Internal(path + " did not appear");
}

// A GPT label with one partition over the whole disk, written with libfdisk, then added to the kernel's view
// with BLKPG (kernels without partition-table parsers find nothing on a re-read).
Status PartitionWholeDisk(const std::string& device) {
  fdisk_context* cxt = fdisk_new_context();
  if (cxt == nullptr) return Internal("libfdisk: cannot allocate a context");
  std::string error;
  fdisk_partition* pa = nullptr;
  uint64_t start_bytes = 0, size_bytes = 0;
  if (fdisk_assign_device(cxt, device.c_str(), 0) != 0) {
    error = "cannot open " + device;
  } else if (fdisk_create_disklabel(cxt, "gpt") != 0) {
    error = "cannot create a GPT label on " + device;
  } else {
    pa = fdisk_new_partition();
    fdisk_partition_start_follow_default(pa, 1);
    fdisk_partition_end_follow_default(pa, 1);
    fdisk_partition_partno_follow_default(pa, 1);
    size_t partno = 0;
    fdisk_partition* written = nullptr;
    if (fdisk_add_partition(cxt, pa, &partno) != 0) {
      error = "cannot add a partition on " + device;
    } else if (fdisk_write_disklabel(cxt) != 0) {
      error = "cannot write the partition table of " + device;
    } else if (fdisk_get_partition(cxt, partno, &written) != 0) {
      error = "cannot read back the partition of " + device;
    } else {
      const uint64_t sector = fdisk_get_sector_size(cxt);
      start_bytes = fdisk_partition_get_start(written) * sector;
      size_bytes = fdisk_partition_get_size(written) * sector;
      fdisk_unref_partition(written);
    }
  }
  if (pa != nullptr) fdisk_unref_partition(pa);
  if (fdisk_get_devfd(cxt) >= 0 && fdisk_deassign_device(cxt, 1) != 0 && error.empty()) {
    error = "cannot close " + device;
  }
  fdisk_unref_context(cxt);
  if (!error.empty()) return Internal("libfdisk: " + error);
  int fd = open(device.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Internal("open " + device + ": " + std::strerror(errno));
  Status s = common::KernelAddPartition(fd, 1, start_bytes, size_bytes);
  close(fd);
  return s;
}

StatusOr<FormattedVolume> MakeFormattedVolume(const std::string& backing, const std::string& mount_path) {
  FormattedVolume v;
  auto disk = LoopDevice::Attach(backing, kVolumeDiskBytes);
  if (!disk.ok()) return disk.status();
  v.disk = std::move(*disk);
  auto mkfs = common::FindSystemProgram("mkfs.ext4");
  if (!mkfs.ok()) return mkfs.status();
  CSI_PROXY_RETURN_IF_ERROR(PartitionWholeDisk(v.disk->path()));
  std::string part = v.disk->PartitionPath(1);
  CSI_PROXY_RETURN_IF_ERROR(WaitForNode(part));
  CSI_PROXY_RETURN_IF_ERROR(common::RunProgramChecked({*mkfs, "-q", "-F", part}));
  fs::create_directories(mount_path);
  if (mount(part.c_str(), mount_path.c_str(), "ext4", 0, nullptr) != 0) {
    return Internal("mount " + part + " on " + mount_path + ": " + std::strerror(errno));
  }
  v.mount = ScopedMount(mount_path);
  return v;
}

}  // namespace

std::string CodeName(int code) {
  static const char* const kNames[] = {
      "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
      "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
      "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
      "DATA_LOSS", "UNAUTHENTICATED"};
  return code >= 0 && code <= 16 ? kNames[code] : std::to_string(code);
}

// The trivial call the metadata methods are compared with: PathExists of an existing directory. Its request
// (field 1, the path) is written by hand so that a group's program needs no filesystem protos.
MethodCase TrivialCase() {
  return {"csi-proxy-filesystem-v1",
          "/v1.Filesystem/PathExists",
          [](const MethodFixture& f) {
            std::string req = "\x0a";
            for (size_t n = f.existing_dir.size();; n >>= 7) {  // varint length
              req.push_back(static_cast<char>(n >= 0x80 ? (n & 0x7f) | 0x80 : n));
              if (n < 0x80) break;
            }
            return req + f.existing_dir;
          },
          {}};
}

int RunMethodBenchmarks(int argc, char** argv, const std::string& group, const std::vector<MethodCase>& given_cases,
                        MethodBenchOptions options) {
  std::vector<MethodCase> cases = given_cases;
  std::vector<std::string> groups = {group};
  if (options.trivial_baseline && !GroupLibrary("filesystem").empty()) {
    groups.push_back("filesystem");
    cases.push_back(TrivialCase());
  }
  InstallCleanupHandlers();
  CommonFlags flags = ParseCommonFlags(&argc, argv);
  benchmark::Initialize(&argc, argv);
  Results& results = Results::Get();

  if (GroupLibrary(group).empty()) {
    results.Note("methods", "group " + group + ": skipped, its library is not built (" + RepoRelative(PluginDir()) +
                                "/libcsi-proxy-" + group + ".so does not exist)");
    return results.Write() ? 0 : 1;
  }
  results.Note("methods", "group " + group + ": measured from " + RepoRelative(GroupLibrary(group)));

  std::vector<size_t> disk_counts = {1, 8, 32, 64};
  std::string no_loops = LoopDevicesUnavailableReason();
  if (!no_loops.empty()) {
    results.Note("methods", "group " + group + ": no disks attached, " + no_loops);
    disk_counts = {0};
  }

  BenchHost host(groups);
  std::vector<std::string> refusals;
  auto endpoints = host.CheckConfig(&refusals);
  if (!endpoints.ok() || endpoints->empty()) {
    std::string why = endpoints.ok() ? "it serves no endpoint" : endpoints.status().message();
    for (const auto& r : refusals) why += "; " + r;
    results.Note("methods", "group " + group + ": skipped, the host does not load it: " + why);
    return results.Write() ? 0 : 1;
  }
  std::vector<std::string> names;
  for (const auto& e : *endpoints) names.push_back(e.name);
  if (auto started = host.Start(names); !started.ok()) {
    results.Note("methods", "group " + group + ": skipped, the host did not start: " + started.status().message());
    return results.Write() ? 0 : 1;
  }

  TempDir scratch("csi-proxy-bench-disks");
  MethodFixture fixture;
  fixture.kubelet_dir = host.kubelet_dir();
  fixture.existing_dir = host.kubelet_dir() + "/bench-dir";
  fixture.symlink_path = host.kubelet_dir() + "/bench-link";
  fs::create_directories(fixture.existing_dir);
  fs::create_directory_symlink(fixture.existing_dir, fixture.symlink_path);

  FormattedVolume volume;
  bool have_volume = false;
  if (options.formatted_volume && no_loops.empty()) {
    auto v = MakeFormattedVolume(scratch.Sub("volume.img"), host.kubelet_dir() + "/bench-volume");
    if (v.ok()) {
      volume = std::move(*v);
      have_volume = true;
      fixture.formatted_disk_number = volume.disk->DiskNumber();
      fixture.volume_id = volume.disk->PartitionPath(1);
      fixture.volume_mount_path = host.kubelet_dir() + "/bench-volume";
    } else {
      results.Note("methods", "group " + group + ": no formatted volume: " + v.status().message());
    }
  }

  LoopPool pool(scratch.path(), kDiskBytes);
  std::map<std::string, std::unique_ptr<RawClient>> clients;
  for (const auto& e : names) clients[e] = std::make_unique<RawClient>(host.endpoint(e));
  const double min_time = flags.quick ? 0.05 : 0.3;
  int registered = 0;

  for (size_t disks : disk_counts) {
    for (const MethodCase& c : cases) {
      std::string name = group + c.method + "/disks:" + std::to_string(disks);
      if (!clients.count(c.endpoint)) {
        results.Note("methods", c.method + ": skipped, the group does not serve " + c.endpoint);
        continue;
      }
      if (c.needs_formatted_volume && !have_volume) {
        if (disks == disk_counts.front()) results.Note("methods", c.method + ": skipped, needs a formatted volume");
        continue;
      }
      // The formatted volume's disk counts as one of the attached disks.
      size_t blanks = disks - (have_volume && disks > 0 ? 1 : 0);
      benchmark::RegisterBenchmark(
          name.c_str(),
          [&, blanks, disks, c](benchmark::State& state) {
            if (pool.size() != blanks) {
              if (Status s = pool.Resize(blanks); !s.ok()) {
                state.SkipWithError(("cannot attach disks: " + s.message()).c_str());
                return;
              }
              fixture.disk_numbers.clear();
              for (const auto& d : pool.devices()) fixture.disk_numbers.push_back(d->DiskNumber());
              if (have_volume) fixture.disk_numbers.push_back(fixture.formatted_disk_number);
            }
            RawClient& client = *clients[c.endpoint];
            const std::string request = c.request(fixture);
            std::string response;
            grpc::Status first = client.Call(c.method, request, &response);
            static std::map<std::string, bool> noted;
            if (!first.ok() && first.error_code() != grpc::StatusCode::FAILED_PRECONDITION &&
                first.error_code() != grpc::StatusCode::NOT_FOUND) {
              state.SkipWithError(
                  ("the call fails with " + CodeName(first.error_code()) + ": " + first.error_message()).c_str());
              return;
            }
            if (!first.ok()) {
              // A method this machine cannot serve (no DMI, no systemd, ...) still answers, with an error: that answer
              // is measured and flagged, so that the report says what the number is.
              if (!noted[c.method]) {
                noted[c.method] = true;
                Results::Get().Note("methods", c.method + " answers " + CodeName(first.error_code()) +
                                                   " on this machine (" + first.error_message() +
                                                   "); its numbers are those of that error answer");
              }
            } else if (std::string problem = c.check ? c.check(response, fixture) : "";
                       !problem.empty() && !noted[c.method]) {
              noted[c.method] = true;
              Results::Get().Note("methods", c.method + " with " + std::to_string(disks) + " disks: " + problem);
            }
            LatencySamples samples;
            samples.Reserve(static_cast<size_t>(state.max_iterations));
            for (auto _ : state) {
              auto t0 = std::chrono::steady_clock::now();
              grpc::Status s = client.Call(c.method, request, nullptr);
              auto t1 = std::chrono::steady_clock::now();
              if (s.error_code() != first.error_code()) {
                state.SkipWithError(("a call answered " + CodeName(s.error_code()) + " (" + s.error_message() +
                                     "), the first one " + CodeName(first.error_code()))
                                        .c_str());
                break;
              }
              samples.Add(t1 - t0);
            }
            state.counters["status_code"] = static_cast<double>(first.error_code());
            state.counters["p50_us"] = samples.PercentileUs(50);
            state.counters["p90_us"] = samples.PercentileUs(90);
            state.counters["p99_us"] = samples.PercentileUs(99);
            state.counters["mean_us"] = samples.MeanUs();
            state.counters["visible_disks"] = CountVisibleDisks();
            state.counters["block_entries"] = CountBlockEntries();
          })
          ->MinWarmUpTime(min_time / 3)
          ->MinTime(min_time)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
      ReportAs(name, "methods", group + " " + c.method, "disks=" + std::to_string(disks));
      ++registered;
    }
  }
  if (registered > 0) RunRegisteredBenchmarks();
  clients.clear();
  if (auto stopped = host.Stop(); !stopped.ok()) results.Note("methods", stopped.status().message());
  return results.Write() ? 0 : 1;
}

}  // namespace csi_proxy::bench

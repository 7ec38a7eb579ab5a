// The staging sequence a CSI driver runs for a new disk, step by step, on a fresh loop device each time:
//   list disks, partition, list volumes, check format, format, mount, unmount
// (a) through csi-proxy: the disk and volume groups over their real sockets;
// (b) the way node scripts usually do it: lsblk, sfdisk + partx, lsblk, blkid, mkfs.ext4, mount, umount, each a
// separate
//     process started with an argv (plugins/common/run_program.h).
// Both run as Google Benchmark repetitions of one sequence each, randomly interleaved, reported by the median of
// each step. Disk creation and the mount directory are set up outside the timing.
#include <sys/stat.h>
#include <unistd.h>

#include <benchmark/benchmark.h>

#include <cctype>

#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

#include "bench_host.h"
#include "cleanup.h"
#include "loop_devices.h"
#include "raw_client.h"
#include "results.h"
#include "run_program.h"
#include "scoped_mount.h"
#include "temp_dir.h"
#include "v1/disk.pb.h"
#include "v1/volume.pb.h"

namespace csi_proxy::bench {
using namespace ::csi_proxy::testing;  // the support library shared with the tests (tests/support)
namespace {

namespace fs = std::filesystem;
constexpr uint64_t kDiskBytes = 256ull << 20;
const char* const kSteps[] = {"list_disks", "partition", "list_volumes", "check_format", "format", "mount", "unmount"};

// Times the steps of one sequence.
class StepClock {
 public:
  template <typename Fn>
  Status Step(const std::string& name, Fn&& fn) {
    auto t0 = std::chrono::steady_clock::now();
    Status s = fn();
    ms_[name] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return s.WithContext(name);
  }
  const std::map<std::string, double>& ms() const { return ms_; }
  double total_ms() const {
    double t = 0;
    for (const auto& [_, v] : ms_) t += v;
    return t;
  }

 private:
  std::map<std::string, double> ms_;
};

bool IsMountPoint(const std::string& path) {
  struct stat self {
  }, parent{};
  if (stat(path.c_str(), &self) != 0 || stat((path + "/..").c_str(), &parent) != 0) return false;
  return self.st_dev != parent.st_dev;
}

Status FromGrpc(const grpc::Status& s) {
  return s.ok() ? Status::Ok() : Status(static_cast<Code>(s.error_code()), s.error_message());
}

template <typename Resp>
Status CallTyped(RawClient& client, const std::string& method, const google::protobuf::MessageLite& req, Resp* resp) {
  std::string bytes;
  CSI_PROXY_RETURN_IF_ERROR(FromGrpc(client.Call(method, req.SerializeAsString(), &bytes, std::chrono::minutes(2))));
  if (!resp->ParseFromString(bytes)) return Internal("the response of " + method + " does not parse");
  return Status::Ok();
}

struct Environment {
  BenchHost* host = nullptr;
  TempDir* scratch = nullptr;
  std::unique_ptr<RawClient> disk;
  std::unique_ptr<RawClient> volume;
  int disk_id = 0;
};

// One fresh disk and an empty mount directory below the kubelet tree (where the volume group allows mounts).
struct Subject {
  std::unique_ptr<LoopDevice> disk;
  std::string target;
};

StatusOr<Subject> NewSubject(Environment& env) {
  Subject s;
  auto disk = LoopDevice::Attach(env.scratch->Sub("disk-" + std::to_string(env.disk_id) + ".img"), kDiskBytes);
  if (!disk.ok()) return disk.status();
  s.disk = std::move(*disk);
  s.target = env.host->kubelet_dir() + "/staging-" + std::to_string(env.disk_id++);
  fs::create_directories(s.target);
  return s;
}

Status ProxySequence(Environment& env, const Subject& subject, StepClock& clock) {
  const uint32_t disk_number = static_cast<uint32_t>(subject.disk->DiskNumber());
  std::string volume_id;
  ScopedMount mounted;
  CSI_PROXY_RETURN_IF_ERROR(clock.Step("list_disks", [&]() -> Status {
    v1::ListDiskIDsResponse resp;
    CSI_PROXY_RETURN_IF_ERROR(CallTyped(*env.disk, "/v1.Disk/ListDiskIDs", v1::ListDiskIDsRequest(), &resp));
    return resp.diskids().contains(disk_number) ? Status::Ok()
                                                : NotFound("disk " + std::to_string(disk_number) + " is not listed");
  }));
  CSI_PROXY_RETURN_IF_ERROR(clock.Step("partition", [&]() -> Status {
    v1::PartitionDiskRequest req;
    req.set_disk_number(disk_number);
    v1::PartitionDiskResponse resp;
    return CallTyped(*env.disk, "/v1.Disk/PartitionDisk", req, &resp);
  }));
  CSI_PROXY_RETURN_IF_ERROR(clock.Step("list_volumes", [&]() -> Status {
    v1::ListVolumesOnDiskRequest req;
    req.set_disk_number(disk_number);
    v1::ListVolumesOnDiskResponse resp;
    CSI_PROXY_RETURN_IF_ERROR(CallTyped(*env.volume, "/v1.Volume/ListVolumesOnDisk", req, &resp));
    if (resp.volume_ids_size() == 0) return NotFound("no volume on the partitioned disk");
    volume_id = resp.volume_ids(0);
    return Status::Ok();
  }));
  CSI_PROXY_RETURN_IF_ERROR(clock.Step("check_format", [&]() -> Status {
    v1::IsVolumeFormattedRequest req;
    req.set_volume_id(volume_id);
    v1::IsVolumeFormattedResponse resp;
    CSI_PROXY_RETURN_IF_ERROR(CallTyped(*env.volume, "/v1.Volume/IsVolumeFormatted", req, &resp));
    return resp.formatted() ? FailedPrecondition("a new disk's volume is already formatted") : Status::Ok();
  }));
  CSI_PROXY_RETURN_IF_ERROR(clock.Step("format", [&]() -> Status {
    v1::FormatVolumeRequest req;
    req.set_volume_id(volume_id);
    v1::FormatVolumeResponse resp;
    return CallTyped(*env.volume, "/v1.Volume/FormatVolume", req, &resp);
  }));
  CSI_PROXY_RETURN_IF_ERROR(clock.Step("mount", [&]() -> Status {
    v1::MountVolumeRequest req;
    req.set_volume_id(volume_id);
    req.set_target_path(subject.target);
    v1::MountVolumeResponse resp;
    Status s = CallTyped(*env.volume, "/v1.Volume/MountVolume", req, &resp);
    if (IsMountPoint(subject.target)) mounted = ScopedMount(subject.target);
    return s;
  }));
  if (!IsMountPoint(subject.target)) return Internal("MountVolume succeeded but " + subject.target + " is not a mount");
  CSI_PROXY_RETURN_IF_ERROR(clock.Step("unmount", [&]() -> Status {
    v1::UnmountVolumeRequest req;
    req.set_volume_id(volume_id);
    req.set_target_path(subject.target);
    v1::UnmountVolumeResponse resp;
    return CallTyped(*env.volume, "/v1.Volume/UnmountVolume", req, &resp);
  }));
  if (IsMountPoint(subject.target))
    return Internal("UnmountVolume succeeded but " + subject.target + " is still a mount");
  mounted.Release();
  return Status::Ok();
}

struct Tools {
  std::string lsblk, sfdisk, partx, blkid, mkfs, mount, umount;
};

StatusOr<Tools> FindTools() {
  Tools t;
  for (auto [field, name] : std::initializer_list<std::pair<std::string*, const char*>>{{&t.lsblk, "lsblk"},
                                                                                        {&t.sfdisk, "sfdisk"},
                                                                                        {&t.partx, "partx"},
                                                                                        {&t.blkid, "blkid"},
                                                                                        {&t.mkfs, "mkfs.ext4"},
                                                                                        {&t.mount, "mount"},
                                                                                        {&t.umount, "umount"}}) {
    auto path = common::FindSystemProgram(name);
    if (!path.ok()) return path.status();
    *field = *path;
  }
  return t;
}

Status ScriptSequence(const Tools& tools, const Subject& subject, StepClock& clock) {
  const std::string dev = subject.disk->path();
  const std::string name = subject.disk->name();
  std::string part;
  ScopedMount mounted;
  CSI_PROXY_RETURN_IF_ERROR(clock.Step("list_disks", [&]() -> Status {
    auto r = common::RunProgram({tools.lsblk, "--json", "--nodeps", "--output", "NAME,SERIAL,WWN,SIZE"});
    if (!r.ok()) return r.status();
    return r->exit_code == 0 && r->output.find('"' + name + '"') != std::string::npos
               ? Status::Ok()
               : NotFound("lsblk does not list " + name + ": " + r->output.substr(0, 200));
  }));
  CSI_PROXY_RETURN_IF_ERROR(clock.Step("partition", [&]() -> Status {
    common::ProgramOptions opts;
    opts.stdin_data = "label: gpt\n,,L\n";  // one partition over the disk
    CSI_PROXY_RETURN_IF_ERROR(common::RunProgramChecked({tools.sfdisk, "--quiet", dev}, opts));
    // sfdisk asks the kernel to re-read the table, which finds nothing on kernels without partition-table
    // parsers; partx adds the partition with BLKPG, as the disk group does.
    return common::RunProgramChecked({tools.partx, "--add", dev});
  }));
  CSI_PROXY_RETURN_IF_ERROR(clock.Step("list_volumes", [&]() -> Status {
    auto r = common::RunProgram({tools.lsblk, "--list", "--noheadings", "--output", "NAME,TYPE", dev});
    if (!r.ok()) return r.status();
    std::istringstream lines(r->output);
    std::string n, type;
    while (lines >> n >> type) {
      if (type == "part") {
        part = "/dev/" + n;
        return Status::Ok();
      }
    }
    return NotFound("lsblk lists no partition on " + dev);
  }));
  CSI_PROXY_RETURN_IF_ERROR(clock.Step("check_format", [&]() -> Status {
    auto r = common::RunProgram({tools.blkid, "-p", "-o", "value", "-s", "TYPE", part});
    if (!r.ok()) return r.status();
    // Nothing found: exit code 2, or (with -p, which also reports the partition entry) no TYPE.
    std::string type = r->output;
    while (!type.empty() && std::isspace(static_cast<unsigned char>(type.back()))) type.pop_back();
    if (r->exit_code == 2 || (r->exit_code == 0 && type.empty())) return Status::Ok();
    return FailedPrecondition("blkid finds " + type + " on a new partition (exit code " + std::to_string(r->exit_code) +
                              ")");
  }));
  // The same mkfs options as the volume group's FormatVolume, so that both sides do the same work.
  CSI_PROXY_RETURN_IF_ERROR(clock.Step("format", [&] {
    return common::RunProgramChecked({tools.mkfs, "-F", "-q", "-E", "nodiscard", part});
  }));
  CSI_PROXY_RETURN_IF_ERROR(clock.Step("mount", [&]() -> Status {
    Status s = common::RunProgramChecked({tools.mount, "-t", "ext4", part, subject.target});
    if (IsMountPoint(subject.target)) mounted = ScopedMount(subject.target);
    return s;
  }));
  CSI_PROXY_RETURN_IF_ERROR(clock.Step("unmount", [&] {
    return common::RunProgramChecked({tools.umount, subject.target});
  }));
  if (IsMountPoint(subject.target)) return Internal("umount succeeded but " + subject.target + " is still a mount");
  mounted.Release();
  return Status::Ok();
}

void SetStepCounters(benchmark::State& state, const StepClock& clock) {
  for (const auto& [step, ms] : clock.ms()) state.counters[step + "_ms"] = ms;
  state.counters["total_ms"] = clock.total_ms();
}

int Main(int argc, char** argv) {
  InstallCleanupHandlers();
  CommonFlags flags = ParseCommonFlags(&argc, argv);
  // Repetitions of the two sequences are interleaved at random, so slow phases of a busy machine hit both.
  std::vector<char*> args(argv, argv + argc);
  std::string interleave = "--benchmark_enable_random_interleaving=true";
  args.insert(args.begin() + 1, interleave.data());
  int nargs = static_cast<int>(args.size());
  benchmark::Initialize(&nargs, args.data());
  Results& results = Results::Get();

  std::vector<std::string> missing;
  for (const char* g : {"disk", "volume"}) {
    if (GroupLibrary(g).empty()) missing.push_back(g);
  }
  if (!missing.empty()) {
    std::string which = missing.size() == 2 ? "disk and volume" : missing[0];
    results.Note("staging", "skipped: the " + which + " group " +
                                (missing.size() == 2 ? "libraries are" : "library is") +
                                " not built (needs libcsi-proxy-disk.so and libcsi-proxy-volume.so in " +
                                RepoRelative(PluginDir()) + ")");
    return results.Write() ? 0 : 1;
  }
  if (std::string why = LoopDevicesUnavailableReason(); !why.empty()) {
    results.Note("staging", "skipped: " + why);
    return results.Write() ? 0 : 1;
  }
  auto tools = FindTools();
  if (!tools.ok()) {
    results.Note("staging", "skipped: " + tools.status().message());
    return results.Write() ? 0 : 1;
  }

  BenchHost host({"disk", "volume"});
  if (auto started = host.Start({"csi-proxy-disk-v1", "csi-proxy-volume-v1"}); !started.ok()) {
    results.Note("staging", "skipped, the host did not start: " + started.status().message());
    return results.Write() ? 0 : 1;
  }
  TempDir scratch("csi-proxy-bench-staging");
  Environment env;
  env.host = &host;
  env.scratch = &scratch;
  env.disk = std::make_unique<RawClient>(host.endpoint("csi-proxy-disk-v1"));
  env.volume = std::make_unique<RawClient>(host.endpoint("csi-proxy-volume-v1"));

  const int repetitions = flags.quick ? 2 : 7;
  auto run = [&](benchmark::State& state, bool proxy) {
    for (auto _ : state) {
      auto subject = NewSubject(env);
      if (!subject.ok()) {
        state.SkipWithError(subject.status().message().c_str());
        break;
      }
      StepClock clock;
      Status s = proxy ? ProxySequence(env, *subject, clock) : ScriptSequence(*tools, *subject, clock);
      if (!s.ok()) {
        state.SkipWithError(s.message().c_str());
        break;
      }
      state.SetIterationTime(clock.total_ms() / 1000.0);
      SetStepCounters(state, clock);
    }
  };
  benchmark::RegisterBenchmark("staging/proxy", [&](benchmark::State& s) { run(s, true); })
      ->Iterations(1)
      ->Repetitions(repetitions)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->ReportAggregatesOnly(true);
  benchmark::RegisterBenchmark("staging/scripts", [&](benchmark::State& s) { run(s, false); })
      ->Iterations(1)
      ->Repetitions(repetitions)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->ReportAggregatesOnly(true);
  ReportAs("staging/proxy", "staging", "proxy", "");
  ReportAs("staging/scripts", "staging", "scripts", "");
  results.Add("staging", "config", "", "repetitions", repetitions, "");
  results.Note("staging",
               "the scripts' partition step is sfdisk (GPT, one partition) then partx --add; the proxy's "
               "PartitionDisk writes the table with libfdisk and adds the partition with BLKPG; both formats "
               "run mkfs.ext4 -F -q -E nodiscard");
  RunRegisteredBenchmarks();

  env.disk.reset();
  env.volume.reset();
  if (auto stopped = host.Stop(); !stopped.ok()) results.Note("staging", stopped.status().message());
  return results.Write() ? 0 : 1;
}

}  // namespace
}  // namespace csi_proxy::bench

int main(int argc, char** argv) { return csi_proxy::bench::Main(argc, argv); }

// Per-method latency of a group's read-only methods through the real host and the real Unix socket, and how it
// grows with the number of attached disks (1, 8, 32, 64 loop devices).
//
// A group's benchmark program (e.g. disk_methods.cc) lists its methods as MethodCases, with requests built from
// the group's own protos, and calls RunMethodBenchmarks. When the group library is not in
// <build>/lib/csi-proxy/plugins, the program records a note that the group was skipped and exits 0.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace csi_proxy::bench {

// What the requests of a group's methods may refer to. Everything lives under the host's kubelet directory or
// on loop devices the benchmark attached.
struct MethodFixture {
  std::string kubelet_dir;
  std::string existing_dir;            // a directory below kubelet_dir
  std::string symlink_path;            // a symlink below kubelet_dir, to existing_dir
  std::vector<uint64_t> disk_numbers;  // the disks the benchmark attached (diskseq), blank ones first
  uint64_t formatted_disk_number = 0;  // a disk with one GPT partition holding ext4 (0: none)
  std::string volume_id;               // that partition, e.g. /dev/loop7p1
  std::string volume_mount_path;       // where it is mounted, below kubelet_dir
};

struct MethodCase {
  std::string endpoint;                                      // csi-proxy-<group>-<version>
  std::string method;                                        // the full path, /v1.Disk/ListDiskIDs
  std::function<std::string(const MethodFixture&)> request;  // serialized request
  // Checks one response (serialized); returns "" when it is what the fixture implies, else the discrepancy
  // (recorded as a note: the method is still measured).
  std::function<std::string(const std::string& response, const MethodFixture&)> check;
  bool needs_formatted_volume = false;
};

struct MethodBenchOptions {
  bool formatted_volume = false;  // attach, partition, format and mount one disk for volume methods
  // Also load the filesystem group into the same host and measure /v1.Filesystem/PathExists (a trivial call)
  // beside the group's methods: the report gives each method's p50 as a ratio to it.
  bool trivial_baseline = false;
};

// Parses the common flags (results.h) and Google Benchmark's, runs every case at every disk count and writes
// the records (section "methods"). Returns the process exit code.
int RunMethodBenchmarks(int argc, char** argv, const std::string& group, const std::vector<MethodCase>& cases,
                        MethodBenchOptions options = {});

// "NOT_FOUND" for 5, and so on.
std::string CodeName(int grpc_code);

// A check that the response parses as `Resp`, then applies `more` (may be empty).
template <typename Resp>
std::function<std::string(const std::string&, const MethodFixture&)> ParsesAs(
    std::function<std::string(const Resp&, const MethodFixture&)> more = {}) {
  return [more](const std::string& bytes, const MethodFixture& f) -> std::string {
    Resp resp;
    if (!resp.ParseFromString(bytes)) return "the response does not parse as " + resp.GetTypeName();
    return more ? more(resp, f) : std::string();
  };
}

}  // namespace csi_proxy::bench

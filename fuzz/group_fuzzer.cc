// Fuzzes one API-group library through the C ABI with the SDK's fake host (csi_proxy/testing/fake_host.hpp),
// the way the host drives it: load the library, negotiate, init with a configuration whose kubelet_path,
// working_dirs and state_dir point at a scratch directory (/tmp/csi-proxy-fuzz/<group>, removed at exit), then for
// every input call one registered handler (the first byte picks the method among every version's, in registration
// order) with the rest of the input as the serialized request. Every call must complete exactly once, within a
// bound, with a status code gRPC knows: the fake host checks that, and any breach aborts. The library is chosen at
// build time (CSI_PROXY_FUZZ_GROUP_LIBRARY): the shipped filesystem library, or a group built with a recording OS
// layer (fuzz/recording_*.cc) where acting for real would be unsafe.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "csi_proxy/testing/fake_host.hpp"

namespace {

using csi_proxy::sdk::testing::FakeHost;

std::unique_ptr<FakeHost> host;
std::string scratch;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "group_fuzzer: %s\n", what.c_str());
  std::abort();
}

void Shutdown() {
  host.reset();  // shuts the library down once every call has completed
  std::error_code ignored;
  std::filesystem::remove_all(scratch, ignored);
  std::filesystem::remove(scratch + ".lock", ignored);
  std::filesystem::remove("/tmp/csi-proxy-fuzz", ignored);  // only if no other group's fuzzer is using it
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // A fixed scratch directory, so the committed seeds can name paths below kubelet_path (fuzz/make_seeds.py);
  // a lock keeps a second fuzzer of the same group out of it.
  scratch = std::string("/tmp/csi-proxy-fuzz/") + CSI_PROXY_FUZZ_GROUP;
  std::filesystem::create_directories("/tmp/csi-proxy-fuzz");
  int lock = open((scratch + ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  if (lock < 0 || flock(lock, LOCK_EX | LOCK_NB) != 0) Fail(scratch + " is in use by another fuzzer");
  std::error_code ignored;
  std::filesystem::remove_all(scratch, ignored);
  for (const char* dir : {"/kubelet", "/working", "/state", "/state/smb"}) {
    std::filesystem::create_directories(scratch + dir);
  }
  std::atexit(Shutdown);

  const bool verbose = std::getenv("CSI_PROXY_FUZZ_VERBOSE") != nullptr;
  host = std::make_unique<FakeHost>(csi_proxy::sdk::testing::FakeHostOptions{
      .kubelet_path = scratch + "/kubelet",
      .working_dirs = {scratch + "/working"},
      .state_dir = scratch + "/state",
      .on_violation = [](const std::string& what) { Fail(what); },
      .on_log =
          [verbose](csi_proxy::sdk::LogLevel, std::string_view line) {
            if (verbose) std::fprintf(stderr, "[plugin] %.*s\n", static_cast<int>(line.size()), line.data());
          }});
  if (auto loaded = host->Load(CSI_PROXY_FUZZ_GROUP_LIBRARY); !loaded.ok()) Fail(loaded.message());
  if (auto negotiated = host->Negotiate(); !negotiated.ok()) Fail("negotiation failed: " + negotiated.message());
  if (auto init = host->Init(CSI_PROXY_FUZZ_GROUP_SETTINGS); !init.ok()) Fail("init failed: " + init.message());
  if (host->methods().empty()) Fail("the library registered no method");
  std::fprintf(stderr, "group_fuzzer: %s registered %zu methods\n", host->group().c_str(), host->methods().size());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto& method = host->methods()[data[0] % host->methods().size()];
  auto result = host->Call(method.path, std::string_view(reinterpret_cast<const char*>(data + 1), size - 1),
                           {.deadline = std::chrono::system_clock::now() + std::chrono::seconds(10),
                            .peer = {getpid(), getuid(), getgid()},
                            .wait = std::chrono::seconds(20)});
  if (!result.completed) Fail(result.message);
  return 0;
}

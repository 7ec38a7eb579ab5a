// The host gives back the file pages it touched only while loading (host/src/runtime/page_trim.h): in this process,
// that nothing is lost (relocated data, code, a thread running meanwhile), and through the real host, that its resident
// memory drops after start-up and after a reload while every call still answers.
#include "runtime/page_trim.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "grpc_client.h"
#include "host_process.h"
#include "v1/echo.pb.h"

namespace csi_proxy::testing {
namespace {

using std::chrono::milliseconds;

long RssKib(const std::string& pid = "self") {
  std::ifstream status("/proc/" + pid + "/status");
  std::string key;
  long value = -1;
  while (status >> key) {
    if (key == "VmRSS:") {
      status >> value;
      break;
    }
  }
  return value;
}

// Data the loader relocates (pointers in a read-only table: .data.rel.ro in a position-independent program) and a
// virtual call: both would break if the relocated pages were discarded.
struct Shape {
  virtual ~Shape() = default;
  virtual std::string Name() const { return "shape"; }
};
struct Square final : Shape {
  std::string Name() const override { return "square"; }
};
const char* const kWords[] = {"alpha", "beta", "gamma"};

TEST(PageTrim, ReleasesFilePagesAndKeepsRelocatedDataCodeAndRunningThreads) {
  std::atomic<bool> stop{false};
  std::atomic<long> spins{0};
  std::thread busy([&] {
    while (!stop.load()) {
      std::string s = std::to_string(spins.load());  // runs library code while pages go away
      spins += static_cast<long>(s.size() > 0);
    }
  });
  while (spins.load() == 0) std::this_thread::yield();
  long before = RssKib();
  size_t released = host::ReleaseFilePages();
  long after = RssKib();
  stop = true;
  busy.join();

  EXPECT_GT(released, 0u);
  EXPECT_LT(after, before) << "resident KiB before " << before << ", after " << after;
  std::unique_ptr<Shape> shape = std::make_unique<Square>();
  EXPECT_EQ(shape->Name(), "square");
  EXPECT_STREQ(kWords[2], "gamma");
  // A second pass finds the pages the calls above brought back, and nothing breaks either.
  host::ReleaseFilePages();
  EXPECT_EQ(std::to_string(42), "42");
}

// 8 MiB of a file, mapped read-only and read: resident file pages, as a library's would be.
class MappedFile {
 public:
  static constexpr size_t kSize = 8 << 20;
  MappedFile() {
    char path[] = "/tmp/csi-proxy-page-trim-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return;
    unlink(path);
    if (ftruncate(fd, kSize) == 0) {
      void* p = mmap(nullptr, kSize, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p != MAP_FAILED) data_ = static_cast<const char*>(p);
    }
    close(fd);
  }
  ~MappedFile() {
    if (data_ != nullptr) munmap(const_cast<char*>(data_), kSize);
  }
  bool ok() const { return data_ != nullptr; }
  void Touch() const {
    volatile char sum = 0;
    for (size_t i = 0; i < kSize; i += 4096) sum = sum + data_[i];
  }
  // The mapping's resident KiB, from /proc/self/smaps.
  long ResidentKib() const {
    std::ifstream smaps("/proc/self/smaps");
    std::string line;
    bool ours = false;
    while (std::getline(smaps, line)) {
      unsigned long start = 0, end = 0;
      if (std::sscanf(line.c_str(), "%lx-%lx ", &start, &end) == 2 && line.find(' ') > line.find('-')) {
        ours = start == reinterpret_cast<uintptr_t>(data_);
      } else if (long kib = 0; ours && std::sscanf(line.c_str(), "Rss: %ld kB", &kib) == 1) {
        return kib;
      }
    }
    return -1;
  }

 private:
  const char* data_ = nullptr;
};

TEST(PageTrim, ATrimmerReleasesOnceTheLastScheduledTimeHasPassed) {
  MappedFile file;
  ASSERT_TRUE(file.ok());
  host::PageTrimmer trimmer;
  file.Touch();
  ASSERT_EQ(file.ResidentKib(), 8192);
  trimmer.Schedule(milliseconds(300));
  std::this_thread::sleep_for(milliseconds(100));
  trimmer.Schedule(milliseconds(500));  // moves the release to 600 ms from the start
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(file.ResidentKib(), 8192) << "released at the time scheduled first, not the one scheduled last";
  std::this_thread::sleep_for(milliseconds(800));
  EXPECT_EQ(file.ResidentKib(), 0) << "not released after the time scheduled last";
  file.Touch();
  EXPECT_EQ(file.ResidentKib(), 8192);
}

std::string EchoThrough(HostProcess& host) {
  v1::EchoRequest req;
  req.set_text("after the trim");
  v1::EchoResponse resp;
  grpc::Status s = Call(Dial(host.endpoint("csi-proxy-echo-v1")), "/v1.Echo/Echo", req, &resp);
  return s.ok() ? resp.text() : "error: " + s.error_message();
}

size_t CountReleases(const std::string& log) {
  size_t n = 0;
  for (size_t at = log.find("KiB of file pages touched while loading"); at != std::string::npos;
       at = log.find("KiB of file pages touched while loading", at + 1)) {
    ++n;
  }
  return n;
}

bool WaitForReleases(HostProcess& host, size_t n) {
  for (int i = 0; i < 500 && CountReleases(host.log()) < n; ++i) std::this_thread::sleep_for(milliseconds(10));
  return CountReleases(host.log()) >= n;
}

TEST(PageTrim, TheHostReleasesItsLoadingPagesAfterStartAndAfterAReloadAndStillServes) {
  HostProcess host("[groups.echo]\n", "log_level = \"debug\"\n");
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1"})) << host.error();
  ASSERT_TRUE(WaitForReleases(host, 1)) << host.log();
  const std::string pid = std::to_string(host.pid());
  long trimmed = RssKib(pid);
  EXPECT_EQ(EchoThrough(host), "after the trim");
  long served = RssKib(pid);
  EXPECT_GT(served, trimmed) << "the call brought back no page: was anything released?";

  host.WriteConfig("[groups.echo]\ngreeting = \"reloaded\"\n", "log_level = \"debug\"\n");
  ASSERT_TRUE(host.Reload()) << host.log();
  ASSERT_TRUE(WaitForReleases(host, 2)) << host.log();
  EXPECT_EQ(EchoThrough(host), "after the trim");
  EXPECT_EQ(host.Stop(), 0);
}

}  // namespace
}  // namespace csi_proxy::testing

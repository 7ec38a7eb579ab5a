// End to end: the disk group's block-device inventory through the real host and its socket, while loop devices
// are attached, detached and grown and other clients call the same endpoint all along.
//   - Read-your-writes: a call that starts after an attach, detach or capacity change returned sees it (no
//     waiting, no retry: the inventory drains the kernel's uevents at the start of every call).
//   - Every concurrent call succeeds, the sizes a client sees never go backwards, and the host stays up.
//   - Afterwards the answers equal those of a freshly started host (a fresh scan of the kernel's devices).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "grpc_client.h"
#include "host_process.h"
#include "loop_device.h"
#include "v1/disk.pb.h"

namespace csi_proxy::disk {
namespace {

using csi_proxy::testing::Call;
using csi_proxy::testing::Dial;
using csi_proxy::testing::HostProcess;
using csi_proxy::testing::LoopDevice;
using Code = grpc::StatusCode;

constexpr const char* kEndpoint = "csi-proxy-disk-v1";
constexpr const char* kDiskGroup = "[groups.disk]\nrequired = true\n";
constexpr uint64_t kMiB = 1 << 20;
constexpr auto kCallTimeout = std::chrono::seconds(5);  // bounds how long stopping the hammering threads takes

std::string Method(const std::string& name) { return "/v1.Disk/" + name; }

std::string CodeName(Code code) {
  switch (code) {
    case Code::OK:
      return "OK";
    case Code::NOT_FOUND:
      return "NOT_FOUND";
    case Code::UNAVAILABLE:
      return "UNAVAILABLE";
    case Code::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case Code::INTERNAL:
      return "INTERNAL";
    default:
      return "code " + std::to_string(code);
  }
}

std::string Describe(const grpc::Status& status) {
  return CodeName(status.error_code()) + " \"" + status.error_message() + "\"";
}

// ---- One helper per call --------------------------------------------------------------------------------------

grpc::Status ListDiskIDs(const std::shared_ptr<grpc::Channel>& channel, v1::ListDiskIDsResponse* ids) {
  return Call(channel, Method("ListDiskIDs"), v1::ListDiskIDsRequest(), ids, kCallTimeout);
}

grpc::Status ListDiskLocations(const std::shared_ptr<grpc::Channel>& channel) {
  v1::ListDiskLocationsResponse locations;
  return Call(channel, Method("ListDiskLocations"), v1::ListDiskLocationsRequest(), &locations, kCallTimeout);
}

grpc::Status GetDiskStats(const std::shared_ptr<grpc::Channel>& channel, uint32_t number, int64_t* size) {
  v1::GetDiskStatsRequest req;
  req.set_disk_number(number);
  v1::GetDiskStatsResponse resp;
  auto status = Call(channel, Method("GetDiskStats"), req, &resp, kCallTimeout);
  *size = resp.total_bytes();
  return status;
}

grpc::Status GetDiskState(const std::shared_ptr<grpc::Channel>& channel, uint32_t number) {
  v1::GetDiskStateRequest req;
  req.set_disk_number(number);
  v1::GetDiskStateResponse resp;
  return Call(channel, Method("GetDiskState"), req, &resp, kCallTimeout);
}

// What one host answers about one disk number: listed by ListDiskIDs, and GetDiskStats' outcome.
struct DiskView {
  bool listed = false;
  Code stats_code = Code::OK;
  int64_t size = 0;

  bool operator==(const DiskView& o) const {
    return listed == o.listed && stats_code == o.stats_code && (stats_code != Code::OK || size == o.size);
  }
  std::string ToString() const {
    std::ostringstream out;
    out << (listed ? "listed" : "not listed") << ", GetDiskStats ";
    if (stats_code == Code::OK) {
      out << "OK with " << size << " bytes";
    } else {
      out << CodeName(stats_code);
    }
    return out.str();
  }
};

// Two calls: ListDiskIDs, then GetDiskStats. Transport failures come back as a non-OK stats_code and no listing.
DiskView View(const std::shared_ptr<grpc::Channel>& channel, uint32_t number) {
  DiskView view;
  v1::ListDiskIDsResponse ids;
  auto listed = ListDiskIDs(channel, &ids);
  view.listed = listed.ok() && ids.diskids().count(number) == 1;
  view.stats_code = GetDiskStats(channel, number, &view.size).error_code();
  return view;
}

// ---- The kernel's side ----------------------------------------------------------------------------------------

// True once the kernel has detached the loop device `name` that had diskseq `number`. Closing the last descriptor
// detaches it at once, but another process that has the device open (a prober, another test) defers the detach
// to its own close: only a detach the kernel has done before a call started must be seen by that call.
bool KernelDetached(const std::string& name, uint32_t number) {
  std::ifstream size_file("/sys/block/" + name + "/size"), seq_file("/sys/block/" + name + "/diskseq");
  uint64_t sectors = 0, seq = 0;
  size_file >> sectors;
  seq_file >> seq;
  return sectors == 0 || seq != number;
}

// The host process exists and is not a zombie (a crashed host stays a zombie until HostProcess reaps it).
bool ProcessRunning(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  auto paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 >= line.size()) return false;
  const char state = line[paren + 2];
  return state != 'Z' && state != 'X';
}

// ---- Clients calling all along --------------------------------------------------------------------------------

// `clients` threads, each on its own connection, calling ListDiskIDs, ListDiskLocations, GetDiskStats and
// GetDiskState on `disks` in turn until stopped. Every call must succeed, ListDiskIDs must list every one of
// `disks`, and the size each client sees of a disk never goes backwards (the tests only grow disks). Stopped and
// joined by Stop() or the destructor, also when the test failed.
class Hammer {
 public:
  Hammer(const std::string& socket, std::vector<uint32_t> disks, size_t clients)
      : disks_(std::move(disks)), clients_(clients) {
    for (size_t i = 0; i < clients; ++i) threads_.emplace_back([this, channel = Dial(socket)] { Run(channel); });
  }
  ~Hammer() { Stop(); }
  Hammer(const Hammer&) = delete;
  Hammer& operator=(const Hammer&) = delete;

  void Stop() {
    stop_ = true;
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  // Waits (bounded) until every client has had a call answered, so that what the test does next races with them.
  bool WaitUntilEveryClientCalled(std::chrono::seconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    return calling_.wait_for(lock, timeout, [&] { return clients_calling_ == clients_; });
  }
  uint64_t calls() const { return calls_; }
  // The first problems seen (empty: every call succeeded and answered consistently).
  std::vector<std::string> problems() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return problems_;
  }

 private:
  void Run(const std::shared_ptr<grpc::Channel>& channel) {
    std::map<uint32_t, int64_t> last_size;
    for (uint64_t turn = 0; !stop_; ++turn) {
      const uint32_t disk = disks_[(turn / 4) % disks_.size()];  // each disk gets every kind of call
      switch (turn % 4) {
        case 0: {
          v1::ListDiskIDsResponse ids;
          auto status = ListDiskIDs(channel, &ids);
          if (!status.ok()) {
            Report("ListDiskIDs: expected OK, got " + Describe(status));
          } else {
            for (uint32_t d : disks_) {
              if (ids.diskids().count(d) == 0) {
                Report("ListDiskIDs: expected disk " + std::to_string(d) + " listed, it is not");
              }
            }
          }
          break;
        }
        case 1:
          if (auto status = ListDiskLocations(channel); !status.ok()) {
            Report("ListDiskLocations: expected OK, got " + Describe(status));
          }
          break;
        case 2: {
          int64_t size = 0;
          auto status = GetDiskStats(channel, disk, &size);
          if (!status.ok()) {
            Report("GetDiskStats(" + std::to_string(disk) + "): expected OK, got " + Describe(status));
          } else if (size < last_size[disk]) {
            Report("GetDiskStats(" + std::to_string(disk) + "): expected at least " + std::to_string(last_size[disk]) +
                   " bytes (seen before by this client), got " + std::to_string(size));
          } else {
            last_size[disk] = size;
          }
          break;
        }
        default:
          if (auto status = GetDiskState(channel, disk); !status.ok()) {
            Report("GetDiskState(" + std::to_string(disk) + "): expected OK, got " + Describe(status));
          }
      }
      ++calls_;
      if (turn == 0) Called();
    }
  }
  void Called() {
    std::lock_guard<std::mutex> lock(mutex_);
    ++clients_calling_;
    calling_.notify_all();
  }
  void Report(std::string problem) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (problems_.size() < 10) problems_.push_back(std::move(problem));
  }

  const std::vector<uint32_t> disks_;
  const size_t clients_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> calls_{0};
  mutable std::mutex mutex_;
  std::vector<std::string> problems_;
  std::condition_variable calling_;
  size_t clients_calling_ = 0;        // with mutex_
  std::vector<std::thread> threads_;  // last: started after everything they use exists, joined first
};

class DiskHotplugRace : public ::testing::Test {
 protected:
  DiskHotplugRace() : host_(kDiskGroup) {}

  void SetUp() override {
    CSI_PROXY_SKIP_WITHOUT_LOOP_DEVICES();
    ASSERT_TRUE(host_.Start({kEndpoint})) << host_.error() << "\n" << host_.log();
    channel_ = Dial(host_.endpoint(kEndpoint));
    // The host's first scan, before the test changes anything: what follows must reach it through the events.
    v1::ListDiskIDsResponse ids;
    auto status = ListDiskIDs(channel_, &ids);
    ASSERT_TRUE(status.ok()) << "the first ListDiskIDs: expected OK, got " << Describe(status);
  }

  std::unique_ptr<Hammer> StartHammering(std::vector<uint32_t> disks) {
    auto hammer = std::make_unique<Hammer>(host_.endpoint(kEndpoint), std::move(disks), 3);
    EXPECT_TRUE(hammer->WaitUntilEveryClientCalled(std::chrono::seconds(10)))
        << "expected the concurrent clients to have a first answer within 10 s, they did not";
    return hammer;
  }

  // Stops the clients; every one of their calls succeeded, there were some, and the host is still up.
  void ExpectHammeringWentWell(Hammer& hammer) {
    hammer.Stop();
    for (const auto& problem : hammer.problems()) ADD_FAILURE() << "a concurrent client: " << problem;
    EXPECT_GT(hammer.calls(), 0u) << "the concurrent clients made no call; the race proved nothing";
    EXPECT_TRUE(ProcessRunning(host_.pid())) << "expected the host to be up, it is gone\n" << host_.log();
  }

  // A host started now (its first call scans the kernel's devices afresh) answers as this one does about
  // `numbers`. Only this test's disks are compared: other processes may attach and detach loop devices meanwhile.
  void ExpectSameAsFreshHost(const std::vector<uint32_t>& numbers) {
    HostProcess fresh(kDiskGroup);
    ASSERT_TRUE(fresh.Start({kEndpoint})) << fresh.error() << "\n" << fresh.log();
    auto fresh_channel = Dial(fresh.endpoint(kEndpoint));
    for (uint32_t number : numbers) {
      const DiskView mine = View(channel_, number), theirs = View(fresh_channel, number);
      EXPECT_TRUE(mine == theirs) << "disk " << number << ": expected what a fresh host answers (" << theirs.ToString()
                                  << "), got " << mine.ToString();
    }
  }

  HostProcess host_;
  std::shared_ptr<grpc::Channel> channel_;
};

// One round on `channel`: attach a loop device of `size`; the call right after lists it with that size. Detach it;
// if the kernel did detach it (someone else holding it open defers the detach to their close), the call right
// after no longer knows it and its number goes to `gone`. Returns what went wrong, or "".
std::string AttachAndDetach(const std::shared_ptr<grpc::Channel>& channel, uint64_t size, std::vector<uint32_t>* gone) {
  std::string name;
  uint32_t number = 0;
  {
    LoopDevice loop(size);
    name = loop.name();
    number = loop.DiskNumber();
    const DiskView attached = View(channel, number);
    if (!attached.listed || attached.stats_code != Code::OK || attached.size != static_cast<int64_t>(size)) {
      return name + " (disk " + std::to_string(number) + ") just attached: expected listed, GetDiskStats OK with " +
             std::to_string(size) + " bytes; got " + attached.ToString();
    }
  }  // leaving the block detaches the loop device
  if (!KernelDetached(name, number)) return "";
  gone->push_back(number);
  const DiskView detached = View(channel, number);
  if (detached.listed || detached.stats_code != Code::NOT_FOUND) {
    return name + " (disk " + std::to_string(number) +
           ") just detached: expected not listed, GetDiskStats NOT_FOUND; got " + detached.ToString();
  }
  return "";
}

uint64_t RoundSize(int round) { return (8 + 8 * (round % 4)) * kMiB; }

// Rounds of attach and detach of disks of different sizes, with three clients calling all along: the call right
// after the attach lists the disk with its size, the call right after the detach no longer knows it.
TEST_F(DiskHotplugRace, AnAttachIsSeenByTheNextCallAndADetachIsGoneByTheNextCall) {
  LoopDevice stable(16 * kMiB);  // what the concurrent clients call about
  auto hammer = StartHammering({stable.DiskNumber()});
  std::vector<uint32_t> gone;
  constexpr int kRounds = 100;
  for (int round = 0; round < kRounds; ++round) {
    auto problem = AttachAndDetach(channel_, RoundSize(round), &gone);
    ASSERT_EQ(problem, "") << "round " << round;
  }
  EXPECT_GT(gone.size(), kRounds / 2u) << "the kernel deferred most detaches; too few were checked";
  ExpectHammeringWentWell(*hammer);
  gone.push_back(stable.DiskNumber());
  ExpectSameAsFreshHost(gone);
}

// The same rounds in two threads at once, each on its own connection: one thread's call also drains the other's
// events, and still each call sees what its own thread did before it.
TEST_F(DiskHotplugRace, ParallelAttachesAndDetachesAreEachSeenByTheirOwnNextCall) {
  LoopDevice stable(16 * kMiB);
  auto hammer = StartHammering({stable.DiskNumber()});
  constexpr int kWorkers = 2, kRounds = 50;
  std::vector<std::vector<uint32_t>> gone(kWorkers);
  std::vector<std::string> problems(kWorkers);
  {
    std::vector<std::thread> workers;
    for (int w = 0; w < kWorkers; ++w) {
      workers.emplace_back([&, w, channel = Dial(host_.endpoint(kEndpoint))] {
        for (int round = 0; round < kRounds && problems[w].empty(); ++round) {
          try {
            problems[w] = AttachAndDetach(channel, RoundSize(round + w), &gone[w]);
          } catch (const std::exception& e) {  // the loop device fixture throws when it cannot attach
            problems[w] = e.what();
          }
          if (!problems[w].empty()) problems[w] = "round " + std::to_string(round) + ": " + problems[w];
        }
      });
    }
    for (auto& worker : workers) worker.join();
  }
  for (int w = 0; w < kWorkers; ++w) {
    EXPECT_EQ(problems[w], "") << "worker " << w;
    if (problems[w].empty()) {
      EXPECT_GT(gone[w].size(), kRounds / 2u) << "worker " << w << ": the kernel deferred most detaches";
    }
  }
  ExpectHammeringWentWell(*hammer);
  std::vector<uint32_t> settled{stable.DiskNumber()};
  for (const auto& numbers : gone) settled.insert(settled.end(), numbers.begin(), numbers.end());
  ExpectSameAsFreshHost(settled);
}

// A disk grown step by step (LOOP_SET_CAPACITY) with three clients calling about it all along: the call right
// after each step reports the new size, and no client ever sees a disk shrink.
TEST_F(DiskHotplugRace, ACapacityChangeIsSeenByTheNextCall) {
  LoopDevice stable(16 * kMiB);
  LoopDevice growing(16 * kMiB);
  auto hammer = StartHammering({stable.DiskNumber(), growing.DiskNumber()});
  for (uint64_t size = 24 * kMiB; size <= 1024 * kMiB; size += 8 * kMiB) {
    growing.Grow(size);
    int64_t reported = 0;
    auto status = GetDiskStats(channel_, growing.DiskNumber(), &reported);
    ASSERT_TRUE(status.ok()) << growing.name() << " grown to " << size << " bytes: expected GetDiskStats OK, got "
                             << Describe(status);
    ASSERT_EQ(reported, static_cast<int64_t>(size))
        << growing.name() << " grown: expected GetDiskStats to report " << size << " bytes, got " << reported;
  }
  ExpectHammeringWentWell(*hammer);
  ExpectSameAsFreshHost({stable.DiskNumber(), growing.DiskNumber()});
}

}  // namespace
}  // namespace csi_proxy::disk

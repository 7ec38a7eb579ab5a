// How the host takes HTTP/2 streams, tried through the real socket with a raw HTTP/2 client (tests/host/
// h2_client.py, on Debian's python3-h2) that does what no gRPC library lets a test do: it ignores the streams limit
// the host advertises, sends HEADERS and nothing more, ends a stream without its request or hangs up mid-call.
// Streams are bounded per connection, per uid, in all and as health watches in all; a request that does not
// arrive within the request timeout is answered; the memory a burst of streams held comes back once they end;
// health and reflection answer only callers the group's lists name; and a call whose request did not arrive whole
// never reaches its handler.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "build_tree.h"
#include "child_process.h"
#include "grpc_client.h"
#include "host_process.h"
#include "run_program.h"
#include "v1/echo.pb.h"
#include "v1alpha2/iscsi.pb.h"

namespace csi_proxy::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr const char* kPython = "/usr/bin/python3";  // Debian's, where python3-h2 is installed
constexpr const char* kEchoEndpoint = "csi-proxy-echo-v1";
constexpr const char* kWatch = "/grpc.health.v1.Health/Watch";
constexpr const char* kCheck = "/grpc.health.v1.Health/Check";

std::string Client() { return csi_proxy::testing::SourceDir() + "/tests/host/h2_client.py"; }

std::string Hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

// What h2_client.py reported: how each stream ended up.
struct Outcome {
  int open = 0;    // response headers, no trailers: a watch that serves
  int silent = 0;  // nothing from the host
  int reset = 0;
  std::map<int, int> status;  // grpc-status -> streams answered with it
  std::string raw;
};

Outcome ParseOutcome(const std::string& line) {
  // {"goaway": false, "open": 100, "reset": 0, "silent": 0, "status": {"8": 1900}, "streams": 2000}
  Outcome o;
  o.raw = line;
  auto number_after = [&](const std::string& key) {
    size_t at = line.find("\"" + key + "\": ");
    return at == std::string::npos ? -1 : std::stoi(line.substr(at + key.size() + 4));
  };
  o.open = number_after("open");
  o.silent = number_after("silent");
  o.reset = number_after("reset");
  size_t status = line.find("\"status\": {");
  if (status != std::string::npos) {
    std::string inside = line.substr(status + 11, line.find('}', status) - status - 11);
    std::istringstream in(inside);
    std::string entry;
    while (std::getline(in, entry, ',')) {
      size_t q1 = entry.find('"'), q2 = entry.find('"', q1 + 1), colon = entry.find(':');
      if (q1 == std::string::npos || q2 == std::string::npos || colon == std::string::npos) continue;
      o.status[std::stoi(entry.substr(q1 + 1, q2 - q1 - 1))] = std::stoi(entry.substr(colon + 1));
    }
  }
  return o;
}

// Runs the client to its end and returns its (first) report.
Outcome Streams(const std::string& socket, const std::string& path, int count, const std::string& mode,
                const std::vector<std::string>& options = {}) {
  std::vector<std::string> argv = {kPython, Client(), socket, path, std::to_string(count), mode};
  argv.insert(argv.end(), options.begin(), options.end());
  auto run = common::RunProgram(argv, {.timeout = std::chrono::minutes(2)});
  if (!run.ok()) return ParseOutcome("error: " + run.status().message());
  std::string first = run->output.substr(0, run->output.find('\n'));
  Outcome o = ParseOutcome(first);
  if (o.open < 0) o.raw = run->output;
  return o;
}

int64_t RssKib(pid_t pid) { return ReadProcessMemory(pid).rss_kib; }

// The host of a sanitizer build keeps freed memory in its allocator's quarantine.
#ifdef __SANITIZE_ADDRESS__
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

// The host's resident memory once it has settled: the pages loading touched are given back a moment after start.
int64_t RestingRssKib(pid_t pid) {
  std::this_thread::sleep_for(milliseconds(1500));
  return RssKib(pid);
}

TEST(Streams, AConnectionThatIgnoresTheAdvertisedLimitHasTheStreamsBeyondItRefused) {
  HostProcess host("[groups.echo]\n");
  ASSERT_TRUE(host.Start({kEchoEndpoint})) << host.error();
  // 2000 health watches on one connection that never acknowledges the host's SETTINGS (so gRPC itself does not
  // enforce the limit they advertise): 100 (the default max_streams_per_connection) serve, the rest are refused.
  Outcome o = Streams(host.endpoint(kEchoEndpoint), kWatch, 2000, "full");
  EXPECT_EQ(o.open, 100) << o.raw;
  EXPECT_EQ(o.status[8], 1900) << o.raw;  // RESOURCE_EXHAUSTED
  EXPECT_NE(host.log().find("refused a stream of uid 0 (gid 0)"), std::string::npos) << host.log();
  EXPECT_NE(host.log().find("the connection holds its maximum of 100 streams"), std::string::npos) << host.log();
  // The connection's streams are gone with it: a well-behaved client is served at once.
  v1::EchoRequest req;
  req.set_text("after");
  v1::EchoResponse resp;
  EXPECT_TRUE(Call(Dial(host.endpoint(kEchoEndpoint)), "/v1.Echo/Echo", req, &resp).ok());
  EXPECT_EQ(host.Stop(), 0);
}

TEST(Streams, OneUidIsBoundedAcrossItsConnectionsAndTheHostInAll) {
  HostProcess host("[groups.echo]\n", "max_streams_per_uid = 150\n");
  ASSERT_TRUE(host.Start({kEchoEndpoint})) << host.error();
  Outcome uid = Streams(host.endpoint(kEchoEndpoint), kWatch, 300, "full", {"--connections", "3"});
  EXPECT_EQ(uid.open, 150) << uid.raw;
  EXPECT_EQ(uid.status[8], 150) << uid.raw;
  EXPECT_NE(host.log().find("uid 0 (gid 0) holds its maximum of 150 streams"), std::string::npos) << host.log();
  EXPECT_EQ(host.Stop(), 0);

  HostProcess small("[groups.echo]\n", "max_streams = 120\n");
  ASSERT_TRUE(small.Start({kEchoEndpoint})) << small.error();
  Outcome all = Streams(small.endpoint(kEchoEndpoint), kWatch, 200, "full", {"--connections", "2"});
  EXPECT_EQ(all.open, 120) << all.raw;
  EXPECT_EQ(all.status[8], 80) << all.raw;
  EXPECT_NE(small.log().find("the host holds its maximum of 120 streams"), std::string::npos) << small.log();
  EXPECT_EQ(small.Stop(), 0);
}

TEST(Streams, HealthWatchesAreBoundedInAllAndTheirMemoryComesBackOnceTheyEnd) {
  HostProcess host("[groups.echo]\n", "max_health_watches = 300\n");
  ASSERT_TRUE(host.Start({kEchoEndpoint})) << host.error();
  const int64_t rest = RestingRssKib(host.pid());
  ASSERT_GT(rest, 0);
  // 20 connections of 100 watches each hold their streams for a while.
  auto client = ChildProcess::Start({kPython, Client(), host.endpoint(kEchoEndpoint), kWatch, "2000", "full",
                                     "--connections", "20", "--settle", "20", "--hold", "30"},
                                    host.dir() + "/h2_client.log");
  ASSERT_TRUE(client.ok()) << client.status().message();
  std::string report;
  for (int i = 0; i < 600 && report.empty(); ++i) {
    std::this_thread::sleep_for(milliseconds(50));
    std::ifstream in(host.dir() + "/h2_client.log");
    std::getline(in, report);
  }
  Outcome o = ParseOutcome(report);
  EXPECT_EQ(o.open, 300) << report;
  EXPECT_EQ(o.status[8], 1700) << report;
  const int64_t during = RssKib(host.pid());
  client->Kill();
  if (kSanitized) {
    EXPECT_EQ(host.Stop(), 0);
    GTEST_SKIP() << "the memory figures hold only without AddressSanitizer, whose allocator keeps what is freed";
  }
  // Measured on this machine kind: 300 watches alone hold some 11 MiB (about 37 KiB each), and the 1700 refused
  // streams leave 14 to 30 MiB of free heap that is given back once the burst ends (checked below). 2000 watches
  // held would take some 74 MiB.
  EXPECT_LT(during, rest + 48 * 1024) << "rest " << rest << " KiB, during " << during << " KiB";
  // The streams end with their connections; a second later the host gives the free heap back.
  int64_t after = RssKib(host.pid());
  for (int i = 0; i < 100 && after > rest + 4 * 1024; ++i) {
    std::this_thread::sleep_for(milliseconds(100));
    after = RssKib(host.pid());
  }
  EXPECT_LE(after, rest + 4 * 1024) << "rest " << rest << " KiB, during " << during << " KiB, after " << after
                                    << " KiB";
  std::cout << "resident memory: " << rest << " KiB at rest, " << during << " KiB with 300 watches (" << o.status[8]
            << " refused), " << after << " KiB once they ended\n";
  EXPECT_EQ(host.Stop(), 0);
}

TEST(Streams, AStreamWhoseRequestNeverComesIsAnsweredAtTheRequestTimeout) {
  HostProcess host("[groups.echo]\n", "request_timeout_seconds = 1\n");
  ASSERT_TRUE(host.Start({kEchoEndpoint})) << host.error();
  auto begin = std::chrono::steady_clock::now();
  // HEADERS and nothing more, on a group's method and on health: answered DEADLINE_EXCEEDED after a second.
  Outcome method = Streams(host.endpoint(kEchoEndpoint), "/v1.Echo/Echo", 50, "half-open", {"--settle", "10"});
  EXPECT_EQ(method.status[4], 50) << method.raw;
  Outcome check = Streams(host.endpoint(kEchoEndpoint), kCheck, 50, "half-open", {"--settle", "10"});
  EXPECT_EQ(check.status[4], 50) << check.raw;
  EXPECT_LT(std::chrono::steady_clock::now() - begin, seconds(8));
  // Whole requests are served as ever.
  v1::EchoRequest req;
  req.set_text("whole");
  Outcome whole = Streams(host.endpoint(kEchoEndpoint), "/v1.Echo/Echo", 50, "full",
                          {"--request-hex", Hex(req.SerializeAsString())});
  EXPECT_EQ(whole.status[0], 50) << whole.raw;
  EXPECT_EQ(host.Stop(), 0);
}

TEST(Streams, HealthAndReflectionAnswerOnlyCallersTheGroupsListsName) {
  // Root (this test) is in no list of the group: it learns nothing of the endpoint.
  HostProcess host("[groups.echo]\n", "allowed_uids = [4242]\n");
  ASSERT_TRUE(host.Start({kEchoEndpoint})) << host.error();
  const std::string endpoint = host.endpoint(kEchoEndpoint);
  const std::string list_services = "3a00";                      // ServerReflectionRequest{list_services: ""}
  EXPECT_EQ(Streams(endpoint, kCheck, 1, "full").status[7], 1);  // PERMISSION_DENIED
  EXPECT_EQ(Streams(endpoint, kWatch, 1, "full").status[7], 1);
  EXPECT_EQ(Streams(endpoint, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", 1, "full",
                    {"--request-hex", list_services})
                .status[7],
            1);
  EXPECT_EQ(Streams(endpoint, "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", 1, "full",
                    {"--request-hex", list_services})
                .status[7],
            1);
  EXPECT_NE(host.log().find("uid 0 (gid 0) may not use grpc.health.v1.Health on the endpoints of group 'echo'"),
            std::string::npos)
      << host.log();
  EXPECT_EQ(host.Stop(), 0);

  // A caller that may call only the read-only methods may see the group's health and reflection.
  HostProcess reader("[groups.echo]\n", "read_only_uids = [0]\n");
  ASSERT_TRUE(reader.Start({kEchoEndpoint})) << reader.error();
  EXPECT_EQ(Streams(reader.endpoint(kEchoEndpoint), kCheck, 1, "full").status[0], 1);
  EXPECT_EQ(Streams(reader.endpoint(kEchoEndpoint), "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", 1,
                    "full", {"--request-hex", list_services})
                .status[0],
            1);
  EXPECT_EQ(reader.Stop(), 0);
}

// How many Echo calls reached the library (WhoAmI counts them).
int64_t EchoCalls(HostProcess& host) {
  v1::WhoAmIResponse who;
  auto s = Call(Dial(host.endpoint(kEchoEndpoint)), "/v1.Echo/WhoAmI", v1::WhoAmIRequest(), &who);
  return s.ok() ? who.echo_calls() : -1;
}

TEST(IncompleteRequests, ACallWithoutItsRequestMessageNeverReachesTheHandler) {
  HostProcess host("[groups.echo]\n");
  ASSERT_TRUE(host.Start({kEchoEndpoint})) << host.error();
  // HEADERS with END_STREAM and no DATA: refused, and the library never sees the call.
  Outcome o = Streams(host.endpoint(kEchoEndpoint), "/v1.Echo/Echo", 50, "headers-only");
  EXPECT_EQ(o.status[3], 50) << o.raw;  // INVALID_ARGUMENT
  // A request cut short, then a hang-up: nothing to run either.
  v1::EchoRequest req;
  req.set_text(std::string(200, 'x'));
  const std::string whole = req.SerializeAsString();
  for (int i = 0; i < 50; ++i) {
    Streams(host.endpoint(kEchoEndpoint), "/v1.Echo/Echo", 4, "partial-hangup", {"--request-hex", Hex(whole)});
  }
  EXPECT_EQ(EchoCalls(host), 0);
  // An empty request that does arrive (a zero-length message) is a request like any other.
  EXPECT_EQ(Streams(host.endpoint(kEchoEndpoint), "/v1.Echo/Echo", 5, "full").status[0], 5);
  EXPECT_EQ(EchoCalls(host), 5);
  EXPECT_EQ(host.Stop(), 0);
}

TEST(IncompleteRequests, SetMutualChapSecretWithoutItsRequestKeepsTheNodesSecret) {
  HostProcess host("[groups.iscsi]\nrequired = true\ninitiator_name = \"iqn.2024-01.io.k8s.csi-proxy.test:h2\"\n");
  const std::string endpoint = "csi-proxy-iscsi-v1alpha2";
  ASSERT_TRUE(host.Start({endpoint})) << host.error();
  const std::string method = "/v1alpha2.Iscsi/SetMutualChapSecret";
  const std::string file = host.dir() + "/state/iscsi/mutual-chap-secret";
  auto read_secret = [&] {
    std::ifstream in(file);
    std::stringstream ss;
    ss << in.rdbuf();
    return in ? ss.str() : std::string("(no file)");
  };
  v1alpha2::SetMutualChapSecretRequest first;
  first.set_mutualchapsecret("first-secret-1");
  v1alpha2::SetMutualChapSecretResponse resp;
  ASSERT_TRUE(Call(Dial(host.endpoint(endpoint)), method, first, &resp).ok());
  ASSERT_EQ(read_secret(), "first-secret-1");

  // What the red-team pass did: HEADERS with END_STREAM, no body. The secret stays.
  Outcome o = Streams(host.endpoint(endpoint), method, 20, "headers-only");
  EXPECT_EQ(o.status[3], 20) << o.raw;
  EXPECT_EQ(read_secret(), "first-secret-1");

  // A request followed at once by a hang-up, or cut short by one, 200 times: the handler may run with the whole
  // request (it arrived), never with an empty or partial one.
  v1alpha2::SetMutualChapSecretRequest second;
  second.set_mutualchapsecret("second-secret2");
  const std::string hex = Hex(second.SerializeAsString());
  for (int i = 0; i < 100; ++i) {
    Streams(host.endpoint(endpoint), method, 1, "hangup", {"--request-hex", hex});
    Streams(host.endpoint(endpoint), method, 1, "partial-hangup", {"--request-hex", hex});
    std::string now = read_secret();
    ASSERT_TRUE(now == "first-secret-1" || now == "second-secret2") << "round " << i << ": " << now;
  }
  EXPECT_EQ(host.Stop(), 0);
}

}  // namespace
}  // namespace csi_proxy::testing

// The host's log and audit log as an administrator reads them: one audit line per mutating or refused call with
// the caller's credentials and the request (secrets redacted), JSON lines on request, time zones, and a last line
// that says why the host exits. And what an attacker or a broken sink cannot do to them: a sink that stops
// reading holds up no call, a line and a caller's refusal lines are bounded, and every line lost is counted.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <google/protobuf/descriptor.pb.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "config/config.h"
#include "grpc_client.h"
#include "host_process.h"
#include "loopback_port.h"
#include "metrics_scrape.h"
#include "observe/audit_log.h"
#include "observe/message_json.h"
#include "temp_dir.h"
#include "v1/echo.pb.h"
#include "v1/filesystem.pb.h"

namespace csi_proxy::testing {
namespace {

namespace fs = std::filesystem;
namespace pb = google::protobuf;
using ::testing::HasSubstr;
using ::testing::Not;

const char* kFilesystem = "[groups.filesystem]\nenabled = true\nrequired = true\n";
const std::string kTime = R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d)";  // RFC 3339 with its zone

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The lines of `path` once it has at least `count` of them (the writer thread writes them a moment after the
// call), or what it has after `timeout`.
std::vector<std::string> WaitForLines(const std::string& path, size_t count,
                                      std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto lines = Lines(ReadAll(path));
    if (lines.size() >= count || std::chrono::steady_clock::now() > deadline) return lines;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::vector<std::string> Matching(const std::vector<std::string>& lines, const std::string& needle) {
  std::vector<std::string> out;
  for (const auto& l : lines) {
    if (l.find(needle) != std::string::npos) out.push_back(l);
  }
  return out;
}

grpc::Status Mkdir(const std::shared_ptr<grpc::Channel>& ch, const std::string& path) {
  ::v1::MkdirRequest req;
  req.set_path(path);
  ::v1::MkdirResponse resp;
  return Call(ch, "/v1.Filesystem/Mkdir", req, &resp);
}

grpc::Status Rmdir(const std::shared_ptr<grpc::Channel>& ch, const std::string& path) {
  ::v1::RmdirRequest req;
  req.set_path(path);
  ::v1::RmdirResponse resp;
  return Call(ch, "/v1.Filesystem/Rmdir", req, &resp);
}

grpc::Status PathExists(const std::shared_ptr<grpc::Channel>& ch, const std::string& path) {
  ::v1::PathExistsRequest req;
  req.set_path(path);
  ::v1::PathExistsResponse resp;
  return Call(ch, "/v1.Filesystem/PathExists", req, &resp);
}

TEST(AuditLog, EveryMutatingCallWritesOneLineWithTheCallerAndTheRequest) {
  HostProcess host(kFilesystem);
  std::string audit = host.dir() + "/audit.log";
  host.WriteConfig(kFilesystem, "audit_log = \"" + audit + "\"\n");
  ASSERT_TRUE(host.Start({"csi-proxy-filesystem-v1"})) << host.error();
  auto ch = Dial(host.endpoint("csi-proxy-filesystem-v1"));
  std::string dir = host.kubelet_dir() + "/made";
  ASSERT_TRUE(Mkdir(ch, dir).ok());
  ASSERT_TRUE(Rmdir(ch, dir).ok());
  EXPECT_EQ(Rmdir(ch, dir).error_code(), grpc::StatusCode::NOT_FOUND);

  struct stat st {};
  ASSERT_EQ(stat(audit.c_str(), &st), 0) << host.log();
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto lines = WaitForLines(audit, 3);
  auto mkdir = Matching(lines, "method=/v1.Filesystem/Mkdir ");
  auto rmdir = Matching(lines, "method=/v1.Filesystem/Rmdir ");
  ASSERT_EQ(mkdir.size(), 1u) << ReadAll(audit);
  ASSERT_EQ(rmdir.size(), 2u) << ReadAll(audit);
  std::string caller = " pid=" + std::to_string(getpid()) + " uid=" + std::to_string(getuid()) +
                       " gid=" + std::to_string(getgid()) + " ";
  EXPECT_TRUE(std::regex_search(mkdir[0], std::regex("^" + kTime + " audit group=filesystem version=v1 "))) << mkdir[0];
  EXPECT_THAT(mkdir[0], HasSubstr(caller));
  EXPECT_THAT(mkdir[0], HasSubstr(" code=OK "));
  EXPECT_TRUE(std::regex_search(mkdir[0], std::regex(" duration_ms=\\d+\\.\\d{3} "))) << mkdir[0];
  EXPECT_THAT(mkdir[0], HasSubstr("request={\"path\":\"" + dir + "\"}"));
  EXPECT_THAT(rmdir[0], HasSubstr("request={\"path\":\"" + dir + "\",\"force\":false}"));
  EXPECT_THAT(rmdir[1], HasSubstr(" code=NOT_FOUND "));
  EXPECT_THAT(rmdir[1], HasSubstr(" message=\""));
}

TEST(AuditLog, RefusedCallsAreAuditedToo) {
  HostProcess host(kFilesystem);
  std::string audit = host.dir() + "/audit.log";
  host.WriteConfig(kFilesystem, "audit_log = \"" + audit + "\"\n");
  ASSERT_TRUE(host.Start({"csi-proxy-filesystem-v1"})) << host.error();
  auto ch = Dial(host.endpoint("csi-proxy-filesystem-v1"));
  EXPECT_EQ(PathExists(ch, "/etc").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Mkdir(ch, "/etc/csi-proxy-audit-test").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  auto lines = WaitForLines(audit, 2);
  auto refused = Matching(lines, " code=PERMISSION_DENIED ");
  ASSERT_EQ(refused.size(), 2u) << ReadAll(audit);
  EXPECT_THAT(refused[0], HasSubstr("method=/v1.Filesystem/PathExists "));
  EXPECT_THAT(refused[1], HasSubstr("method=/v1.Filesystem/Mkdir "));
  EXPECT_FALSE(fs::exists("/etc/csi-proxy-audit-test"));
}

TEST(AuditLog, JsonLinesWhenLogFormatIsJsonAndTheFileIsReopenedOnReload) {
  HostProcess host(kFilesystem);
  std::string audit = host.dir() + "/audit.log";
  std::string keys = "audit_log = \"" + audit + "\"\nlog_format = \"json\"\n";
  host.WriteConfig(kFilesystem, keys);
  ASSERT_TRUE(host.Start({"csi-proxy-filesystem-v1"})) << host.error();
  auto ch = Dial(host.endpoint("csi-proxy-filesystem-v1"));
  std::string dir = host.kubelet_dir() + "/made";
  ASSERT_TRUE(Mkdir(ch, dir).ok());

  auto lines = WaitForLines(audit, 1);
  ASSERT_EQ(lines.size(), 1u) << ReadAll(audit);
  EXPECT_TRUE(std::regex_search(lines[0], std::regex("^\\{\"time\":\"" + kTime + "\",\"audit\":true,"))) << lines[0];
  for (const std::string& field : std::vector<std::string>{
           "\"group\":\"filesystem\"", "\"method\":\"/v1.Filesystem/Mkdir\"",
           "\"pid\":" + std::to_string(getpid()) + ",", "\"uid\":" + std::to_string(getuid()) + ",",
           "\"request\":{\"path\":\"" + dir + "\"}", "\"code\":\"OK\"", "\"duration_ms\":"}) {
    EXPECT_THAT(lines[0], HasSubstr(field));
  }

  // logrotate moves the file and sends SIGHUP: the next line goes to a new file.
  fs::rename(audit, audit + ".1");
  ASSERT_TRUE(host.Reload()) << host.log();
  ASSERT_TRUE(Rmdir(ch, dir).ok());
  auto fresh = WaitForLines(audit, 1);
  EXPECT_EQ(Lines(ReadAll(audit + ".1")).size(), 1u);
  ASSERT_EQ(fresh.size(), 1u) << host.log();
  EXPECT_THAT(fresh[0], HasSubstr("\"method\":\"/v1.Filesystem/Rmdir\""));

  // The host's own log is JSON lines too: time with zone, level, group when the line is about one, message.
  auto log = Lines(host.log());
  ASSERT_FALSE(log.empty());
  for (const auto& line : log) {
    EXPECT_TRUE(
        std::regex_search(line, std::regex("^\\{\"time\":\"" + kTime + "\",\"level\":\"[a-z]+\",.*\"msg\":\".*\"\\}$")))
        << line;
  }
  EXPECT_THAT(host.log(), HasSubstr("\"group\":\"filesystem\",\"msg\":\"group 'filesystem' loaded from"));
}

// A hand-written service whose request carries secrets, as the SMB and iSCSI groups' do.
std::vector<std::string> SecretServiceDescriptors() {
  pb::FileDescriptorProto file;
  file.set_name("secret_test.proto");
  file.set_package("t");
  file.set_syntax("proto3");
  pb::DescriptorProto* auth = file.add_message_type();
  auth->set_name("Auth");
  auto add = [](pb::DescriptorProto* m, const char* name, int number, pb::FieldDescriptorProto::Type type) {
    pb::FieldDescriptorProto* f = m->add_field();
    f->set_name(name);
    f->set_number(number);
    f->set_type(type);
    f->set_label(pb::FieldDescriptorProto::LABEL_OPTIONAL);
    return f;
  };
  add(auth, "chap_username", 1, pb::FieldDescriptorProto::TYPE_STRING);
  add(auth, "chap_secret", 2, pb::FieldDescriptorProto::TYPE_STRING);
  pb::DescriptorProto* req = file.add_message_type();
  req->set_name("MapRequest");
  add(req, "remote_path", 1, pb::FieldDescriptorProto::TYPE_STRING);
  add(req, "username", 2, pb::FieldDescriptorProto::TYPE_STRING);
  add(req, "password", 3, pb::FieldDescriptorProto::TYPE_STRING);
  add(req, "auth", 4, pb::FieldDescriptorProto::TYPE_MESSAGE)->set_type_name(".t.Auth");
  add(req, "MutualChapSecret", 5, pb::FieldDescriptorProto::TYPE_STRING);
  add(req, "token_bytes", 6, pb::FieldDescriptorProto::TYPE_BYTES);
  pb::DescriptorProto* resp = file.add_message_type();
  resp->set_name("MapResponse");
  pb::ServiceDescriptorProto* svc = file.add_service();
  svc->set_name("Smb");
  pb::MethodDescriptorProto* m = svc->add_method();
  m->set_name("Map");
  m->set_input_type(".t.MapRequest");
  m->set_output_type(".t.MapResponse");
  return {file.SerializeAsString()};
}

host::Endpoint SecretEndpoint() {
  host::Endpoint endpoint;
  endpoint.name = "csi-proxy-smb-v1";
  endpoint.group = "smb";
  endpoint.version = "v1";
  endpoint.file_descriptors = SecretServiceDescriptors();
  return endpoint;
}

TEST(AuditLog, SecretsAreRedactedAndAVersionOneLibraryLogsTheSizeOnly) {
  host::Endpoint endpoint = SecretEndpoint();
  auto codec = host::MessageJson::Build(endpoint.file_descriptors);
  ASSERT_TRUE(codec.ok()) << codec.status().message();
  const auto* method = (*codec)->FindMethod("/t.Smb/Map");
  ASSERT_NE(method, nullptr);
  auto bytes = (*codec)->FromJson(method->input_type(),
                                  R"({"remotePath": "//server/share", "username": "alice", "password": "hunter2",
                                      "auth": {"chapUsername": "iqn.x", "chapSecret": "s3cret-chap"},
                                      "MutualChapSecret": "mutual-s3cret", "tokenBytes": "c2VjcmV0"})");
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();

  host::MethodHandler handler;  // flags 0: mutating
  host::PeerCredentials peer{1234, 1000, 1001};
  host::AuditLog audit;
  host::CallEvent event{endpoint, "/t.Smb/Map",        &handler, peer,
                        *bytes,   CSI_PROXY_STATUS_OK, "",       std::chrono::milliseconds(12)};
  std::string line = audit.Line(event, std::chrono::system_clock::now());
  for (const char* secret : {"hunter2", "s3cret-chap", "mutual-s3cret", "c2VjcmV0"}) {
    EXPECT_THAT(line, Not(HasSubstr(secret))) << line;
  }
  EXPECT_THAT(line, HasSubstr("\"password\":\"(redacted)\""));
  EXPECT_THAT(line, HasSubstr("\"chapSecret\":\"(redacted)\""));
  EXPECT_THAT(line, HasSubstr("\"MutualChapSecret\":\"(redacted)\""));
  EXPECT_THAT(line, HasSubstr("\"username\":\"alice\""));
  EXPECT_THAT(line, HasSubstr("\"chapUsername\":\"iqn.x\""));
  EXPECT_THAT(line, HasSubstr(" pid=1234 uid=1000 gid=1001 code=OK duration_ms=12.000 "));

  // No descriptors: the request's size, never its bytes.
  endpoint.file_descriptors.clear();
  line = audit.Line(event, std::chrono::system_clock::now());
  EXPECT_THAT(line, HasSubstr(" request_bytes=" + std::to_string(bytes->size())));
  EXPECT_THAT(line, Not(HasSubstr("hunter2")));
}

// What a line costs the thread that answers the call: rendering the request from the descriptors, the redaction
// and the write. Printed for docs/operations.md; the bound only catches an order-of-magnitude regression.
TEST(AuditLog, ALineCostsTheAnsweringThreadMicroseconds) {
  TempDir dir;
  host::Endpoint endpoint = SecretEndpoint();
  auto codec = host::MessageJson::Build(endpoint.file_descriptors);
  ASSERT_TRUE(codec.ok());
  auto bytes = (*codec)->FromJson((*codec)->FindMethod("/t.Smb/Map")->input_type(),
                                  R"({"remotePath": "//server/share", "username": "alice", "password": "hunter2"})");
  ASSERT_TRUE(bytes.ok());
  host::MethodHandler handler;
  host::PeerCredentials peer{1234, 0, 0};
  host::CallEvent event{endpoint, "/t.Smb/Map",        &handler, peer,
                        *bytes,   CSI_PROXY_STATUS_OK, "",       std::chrono::milliseconds(3)};
  for (bool json : {false, true}) {
    host::AuditLog audit;
    std::string path = dir.path() + (json ? "/audit.json" : "/audit.log");
    ASSERT_TRUE(audit.Open(path, json).ok());
    constexpr int kLines = 5000;
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kLines; ++i) audit.OnFinished(event);
    auto per_line = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start) / kLines;
    std::printf("audit line (%s): %.1f us\n", json ? "json" : "text", per_line.count());
    EXPECT_LT(per_line.count(), 500.0);
    audit.Close(std::chrono::seconds(10));
    EXPECT_EQ(Lines(ReadAll(path)).size(), static_cast<size_t>(kLines));
    EXPECT_EQ(audit.stats().written, static_cast<uint64_t>(kLines));
  }
}

// ---- What a sink that stops reading, or a caller who provokes lines, can do to the host: nothing that matters.

// A FIFO with a reader that never reads: the pipe takes 64 KiB, then nothing more. Closed (the reader) when done.
class StalledFifo {
 public:
  explicit StalledFifo(std::string path) : path_(std::move(path)) {
    if (mkfifo(path_.c_str(), 0600) == 0) reader_ = open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  }
  ~StalledFifo() { Close(); }
  bool ok() const { return reader_ >= 0; }
  const std::string& path() const { return path_; }
  // Reads what is in the pipe now; returns it.
  std::string Drain() {
    std::string out;
    char buf[65536];
    for (ssize_t n; (n = read(reader_, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
    return out;
  }
  void Close() {
    if (reader_ >= 0) close(reader_);
    reader_ = -1;
  }

 private:
  std::string path_;
  int reader_ = -1;
};

// About 8 KiB of JSON a line (within the request's bound): the 4 MiB queue is full after some 520 lines.
v1::EchoRequest LargeEcho() {
  v1::EchoRequest req;
  req.set_text(std::string(8000, 'a'));
  return req;
}

struct CallTally {
  int ok = 0;
  int unavailable = 0;
  int other = 0;
  std::chrono::milliseconds slowest{0};
  void Add(const grpc::Status& s, std::chrono::steady_clock::time_point started) {
    (s.ok() ? ok : s.error_code() == grpc::StatusCode::UNAVAILABLE ? unavailable : other) += 1;
    slowest = std::max(
        slowest, std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started));
  }
};

TEST(AuditLog, ASinkThatStopsReadingHoldsUpNoCallAndTheLinesLostAreCounted) {
  HostProcess host("[groups.echo]\n");
  StalledFifo fifo(host.dir() + "/audit.fifo");
  ASSERT_TRUE(fifo.ok());
  const uint16_t port = test_support::FreeLoopbackPort();
  host.WriteConfig("[groups.echo]\n", "audit_log = \"" + fifo.path() +
                                          "\"\nmetrics_address = \"127.0.0.1:" + std::to_string(port) + "\"\n");
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1"})) << host.error();
  auto ch = Dial(host.endpoint("csi-proxy-echo-v1"));

  // Twice what the pipe and the queue hold, each mutating call (Echo) followed now and then by a read-only one;
  // the first call that fails ends the run (a blocked host would fail every one after it).
  CallTally mutating, read_only;
  for (int i = 0; i < 1200 && mutating.ok + read_only.ok == i + (i + 9) / 10; ++i) {
    v1::EchoResponse resp;
    auto started = std::chrono::steady_clock::now();
    mutating.Add(Call(ch, "/v1.Echo/Echo", LargeEcho(), &resp, std::chrono::seconds(3)), started);
    if (i % 10 != 0) continue;
    v1::WhoAmIResponse who;
    started = std::chrono::steady_clock::now();
    read_only.Add(Call(ch, "/v1.Echo/WhoAmI", v1::WhoAmIRequest(), &who, std::chrono::seconds(3)), started);
  }
  EXPECT_EQ(mutating.ok, 1200) << host.log();
  EXPECT_EQ(read_only.ok, 120);
  EXPECT_LT(mutating.slowest, std::chrono::seconds(1));
  EXPECT_LT(read_only.slowest, std::chrono::seconds(1));

  std::string metrics = Scrape(port);
  EXPECT_GT(Value(metrics, "csi_proxy_audit_lines_lost_total", {{"reason", "queue_full"}}), 0) << metrics;
  EXPECT_GE(Value(metrics, "csi_proxy_audit_queue_bytes", {}), 4.0 * 1024 * 1024 - 16 * 1024) << metrics;
  // The loss is said in the log (once in a while, not per line).
  for (int i = 0; i < 300 && host.log().find("line(s) lost") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_THAT(host.log(), HasSubstr("audit log: ")) << host.log();
  EXPECT_THAT(host.log(), HasSubstr("because the queue of 4194304 bytes was full"));
  // A stop is not held up by the lines the sink never takes.
  auto stopping = std::chrono::steady_clock::now();
  EXPECT_EQ(host.Stop(), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - stopping, std::chrono::seconds(10));
}

TEST(AuditLog, WithOverflowRefuseAMutatingCallWhoseLineCannotBeKeptIsRefusedAndNoneThatRanGoesUnrecorded) {
  HostProcess host("[groups.echo]\n");
  StalledFifo fifo(host.dir() + "/audit.fifo");
  ASSERT_TRUE(fifo.ok());
  host.WriteConfig("[groups.echo]\n", "audit_log = \"" + fifo.path() + "\"\naudit_log_overflow = \"refuse\"\n");
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1"})) << host.error();
  auto ch = Dial(host.endpoint("csi-proxy-echo-v1"));

  CallTally mutating, read_only;
  for (int i = 0; i < 1200; ++i) {
    v1::EchoResponse resp;
    auto started = std::chrono::steady_clock::now();
    mutating.Add(Call(ch, "/v1.Echo/Echo", LargeEcho(), &resp, std::chrono::seconds(5)), started);
    v1::WhoAmIResponse who;
    started = std::chrono::steady_clock::now();
    read_only.Add(Call(ch, "/v1.Echo/WhoAmI", v1::WhoAmIRequest(), &who, std::chrono::seconds(5)), started);
  }
  // Once the queue was full, mutating calls were refused at once, and read-only ones went on.
  EXPECT_GT(mutating.ok, 400);
  EXPECT_GT(mutating.unavailable, 0);
  EXPECT_EQ(mutating.other, 0);
  EXPECT_EQ(read_only.ok, 1200);
  EXPECT_LT(mutating.slowest, std::chrono::seconds(1));
  EXPECT_LT(read_only.slowest, std::chrono::seconds(1));
  v1::EchoResponse resp;
  auto refused = Call(ch, "/v1.Echo/Echo", LargeEcho(), &resp, std::chrono::seconds(5));
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(refused.error_message(), HasSubstr("the audit log cannot record this call now"));

  // The sink reads again: mutating calls pass again, and every call that ran has its line.
  std::string written;
  int ok_after = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (ok_after < 10 && std::chrono::steady_clock::now() < deadline) {
    written += fifo.Drain();
    ok_after += Call(ch, "/v1.Echo/Echo", LargeEcho(), &resp, std::chrono::seconds(5)).ok() ? 1 : 0;
  }
  EXPECT_EQ(ok_after, 10);
  const size_t ran = static_cast<size_t>(mutating.ok + ok_after);
  while (Matching(Lines(written), "method=/v1.Echo/Echo ").size() < ran &&
         std::chrono::steady_clock::now() < deadline) {
    written += fifo.Drain();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto lines = Matching(Lines(written), "method=/v1.Echo/Echo ");
  EXPECT_EQ(lines.size(), ran);
  EXPECT_EQ(Matching(lines, " code=OK ").size(), ran);  // the refused calls never ran and are not written
  EXPECT_EQ(host.Stop(), 0);
}

// Through the real host: one caller's refusals and one huge request cost the audit log a bounded number of bytes.
TEST(AuditLog, ACallersRefusalsAndItsHugeRequestsCostTheAuditLogLittle) {
  HostProcess host("[groups.echo]\n");
  const std::string audit = host.dir() + "/audit.log";
  host.WriteConfig("[groups.echo]\nallowed_uids = [4242]\n", "audit_log = \"" + audit + "\"\n");
  ASSERT_TRUE(host.Start({"csi-proxy-echo-v1"})) << host.error();
  auto ch = Dial(host.endpoint("csi-proxy-echo-v1"));
  v1::EchoRequest req;
  req.set_text("x");
  v1::EchoResponse resp;
  for (int i = 0; i < 300; ++i) {
    ASSERT_EQ(Call(ch, "/v1.Echo/Echo", req, &resp).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  }
  WaitForLines(audit, host::AuditLog::kRefusalBurst);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // any line beyond the budget would be there now
  EXPECT_EQ(Matching(Lines(ReadAll(audit)), " code=PERMISSION_DENIED ").size(), host::AuditLog::kRefusalBurst);
  EXPECT_EQ(host.Stop(), 0);

  // 60 KiB of control bytes in an allowed request: six bytes of JSON escape each, cut to 8 KiB in the line.
  HostProcess allowed("[groups.echo]\n");
  const std::string allowed_audit = allowed.dir() + "/audit.log";
  allowed.WriteConfig("[groups.echo]\n", "audit_log = \"" + allowed_audit + "\"\n");
  ASSERT_TRUE(allowed.Start({"csi-proxy-echo-v1"})) << allowed.error();
  req.set_text(std::string(60 * 1024, '\x01'));
  ASSERT_TRUE(Call(Dial(allowed.endpoint("csi-proxy-echo-v1")), "/v1.Echo/Echo", req, &resp).ok());
  auto lines = WaitForLines(allowed_audit, 1);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_LT(lines[0].size(), 12u * 1024) << "a line of " << lines[0].size() << " bytes";
  EXPECT_THAT(lines[0], HasSubstr(" request_truncated="));
  EXPECT_EQ(allowed.Stop(), 0);
}

TEST(AuditLog, ALongRequestOrMessageIsCutAndTheLineSaysSo) {
  host::Endpoint endpoint = SecretEndpoint();
  auto codec = host::MessageJson::Build(endpoint.file_descriptors);
  ASSERT_TRUE(codec.ok());
  const auto* input = (*codec)->FindMethod("/t.Smb/Map")->input_type();
  // 64 KiB of control bytes: each one is six bytes of JSON escape (\u0001).
  std::string escaped;
  for (int i = 0; i < 64 * 1024; ++i) escaped += "\\u0001";
  auto bytes = (*codec)->FromJson(input, "{\"remotePath\": \"" + escaped + "\"}");
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  host::MethodHandler handler;
  host::PeerCredentials peer{1, 0, 0};
  const std::string message(100 * 1024, '\x02');
  for (bool json : {false, true}) {
    TempDir dir;
    host::AuditLog audit;
    ASSERT_TRUE(audit.Open(dir.Sub("audit.log"), json).ok());
    host::CallEvent event{endpoint, "/t.Smb/Map",
                          &handler, peer,
                          *bytes,   CSI_PROXY_STATUS_INTERNAL,
                          message,  std::chrono::milliseconds(1)};
    std::string line = audit.Line(event, std::chrono::system_clock::now());
    EXPECT_LT(line.size(), 16u * 1024) << "a line is bounded whatever the request and the message hold";
    const std::string cut_request = json ? "\"request_truncated\":" : " request_truncated=";
    const std::string cut_message = json ? "\"message_truncated\":" + std::to_string(message.size())
                                         : " message_truncated=" + std::to_string(message.size());
    EXPECT_THAT(line, HasSubstr(cut_request));
    EXPECT_THAT(line, HasSubstr(cut_message));
    EXPECT_THAT(line, HasSubstr(json ? "\"request_prefix\":\"{" : " request_prefix=\"{"));
    audit.OnFinished(event);
    audit.Close(std::chrono::seconds(5));
    EXPECT_EQ(audit.stats().truncated, 2u);  // Line() and the line written
    EXPECT_EQ(Lines(ReadAll(dir.Sub("audit.log"))).size(), 1u);
  }
}

TEST(AuditLog, RefusalsOfOneCallerAreWrittenTwentyEveryTenSecondsAndTheNextLineCountsTheRest) {
  host::Endpoint endpoint = SecretEndpoint();
  host::MethodHandler handler;
  TempDir dir;
  host::AuditLog audit;
  ASSERT_TRUE(audit.Open(dir.Sub("audit.log"), false).ok());
  host::PeerCredentials flooding{100, 1000, 1000}, other{200, 2000, 2000};
  for (int i = 0; i < 500; ++i) {
    audit.OnFinished(host::CallEvent{endpoint, "/t.Smb/Map", &handler, flooding, "", CSI_PROXY_STATUS_PERMISSION_DENIED,
                                     "uid 1000 may not call", std::chrono::milliseconds(0)});
  }
  // Another caller's refusals and everybody's mutating calls are not held back by the flood.
  audit.OnFinished(host::CallEvent{endpoint, "/t.Smb/Map", &handler, other, "", CSI_PROXY_STATUS_PERMISSION_DENIED,
                                   "uid 2000 may not call", std::chrono::milliseconds(0)});
  audit.OnFinished(host::CallEvent{endpoint, "/t.Smb/Map", &handler, flooding, "", CSI_PROXY_STATUS_OK, "",
                                   std::chrono::milliseconds(0)});
  audit.Close(std::chrono::seconds(5));
  auto lines = Lines(ReadAll(dir.Sub("audit.log")));
  EXPECT_EQ(Matching(lines, " uid=1000 gid=1000 code=PERMISSION_DENIED ").size(), host::AuditLog::kRefusalBurst);
  EXPECT_EQ(Matching(lines, " uid=2000 ").size(), 1u);
  EXPECT_EQ(Matching(lines, " uid=1000 gid=1000 code=OK ").size(), 1u);
  EXPECT_EQ(audit.stats().refusals_not_written, 500 - host::AuditLog::kRefusalBurst);

  // The budget's window: once it is over, the next line of that caller says how many were not written.
  host::LineBudget budget(2, std::chrono::seconds(10));
  auto t0 = host::LineBudget::Clock::now();
  uint64_t not_written = 99;
  EXPECT_TRUE(budget.Allow("1000", not_written, t0));
  EXPECT_EQ(not_written, 0u);
  EXPECT_TRUE(budget.Allow("1000", not_written, t0));
  for (int i = 0; i < 7; ++i) EXPECT_FALSE(budget.Allow("1000", not_written, t0 + std::chrono::seconds(9)));
  EXPECT_TRUE(budget.Allow("1000", not_written, t0 + std::chrono::seconds(10)));
  EXPECT_EQ(not_written, 7u);
  host::CallEvent refusal{endpoint, "/t.Smb/Map",
                          &handler, flooding,
                          "",       CSI_PROXY_STATUS_PERMISSION_DENIED,
                          "no",     std::chrono::milliseconds(0)};
  EXPECT_THAT(audit.Line(refusal, std::chrono::system_clock::now(), 7), HasSubstr(" refusals_not_written=7"));
}

TEST(AuditLog, LinesAFullDiskDoesNotTakeAreCountedLost) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to mount a small tmpfs";
  TempDir dir;
  const std::string disk = dir.MakeDir("disk");
  if (mount("tmpfs", disk.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0700") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs: " << std::strerror(errno);
  }
  struct Unmount {
    std::string path;
    ~Unmount() { umount2(path.c_str(), MNT_DETACH); }
  } unmount{disk};
  host::Endpoint endpoint = SecretEndpoint();
  host::MethodHandler handler;
  host::PeerCredentials peer{1, 0, 0};
  host::AuditLog audit;
  ASSERT_TRUE(audit.Open(disk + "/audit.log", false).ok());
  const std::string request(1000, 'r');  // no descriptors match: the line says request_bytes
  constexpr int kLines = 400;            // about 60 KiB of lines each time: the disk holds one round at most
  for (int i = 0; i < kLines; ++i) {
    audit.OnFinished(host::CallEvent{endpoint, "/t.Smb/Other", &handler, peer, request, CSI_PROXY_STATUS_OK, "",
                                     std::chrono::milliseconds(0)});
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  for (int i = 0; i < kLines; ++i) {
    audit.OnFinished(host::CallEvent{endpoint, "/t.Smb/Other", &handler, peer, request, CSI_PROXY_STATUS_OK, "",
                                     std::chrono::milliseconds(0)});
  }
  audit.Close(std::chrono::seconds(5));
  host::AuditLog::Stats stats = audit.stats();
  EXPECT_GT(stats.lost_write_failed, 0u);
  EXPECT_EQ(stats.written + stats.lost_write_failed + stats.lost_queue_full, 2u * kLines);
  const std::string kept = ReadAll(disk + "/audit.log");
  EXPECT_EQ(static_cast<uint64_t>(std::count(kept.begin(), kept.end(), '\n')), stats.written);
}

TEST(HostLog, TextLinesCarryTheTimeZoneAndWarningIsALevelName) {
  for (const char* level : {"warn", "warning", "error", "info"}) {
    auto c = host::ParseConfig(std::string("[host]\nlog_level = \"") + level + "\"\n", "t.toml", "/usr/bin");
    EXPECT_TRUE(c.ok()) << level << ": " << c.status().message();
  }
  auto bad = host::ParseConfig("[host]\nlog_format = \"xml\"\n", "t.toml", "/usr/bin");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("host.log_format"));

  HostProcess host(kFilesystem, "log_level = \"warning\"\n");
  ASSERT_TRUE(host.Start({"csi-proxy-filesystem-v1"})) << host.error();
  EXPECT_EQ(host.Stop(), 0);
  HostProcess verbose(kFilesystem);
  ASSERT_TRUE(verbose.Start({"csi-proxy-filesystem-v1"})) << verbose.error();
  // The sockets serve a moment before the host writes its "ready:" line.
  for (int i = 0; i < 200 && verbose.log().find("ready:") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto lines = Lines(verbose.log());
  ASSERT_FALSE(lines.empty());
  for (const auto& line : lines) EXPECT_TRUE(std::regex_search(line, std::regex("^" + kTime + " "))) << line;
  // At warning, the info lines are left out.
  EXPECT_THAT(verbose.log(), HasSubstr("ready:"));
  EXPECT_THAT(host.log(), Not(HasSubstr("ready:")));
}

std::string LastLine(const std::string& log) {
  auto lines = Lines(log);
  return lines.empty() ? "" : lines.back();
}

TEST(ExitReason, ASignalIsTheLastLine) {
  HostProcess host(kFilesystem);
  ASSERT_TRUE(host.Start({"csi-proxy-filesystem-v1"})) << host.error();
  EXPECT_EQ(host.Stop(), 0);
  EXPECT_THAT(LastLine(host.log()), HasSubstr("exiting on SIGTERM"));
}

TEST(ExitReason, ARequiredGroupThatFailedToLoad) {
  HostProcess host("[groups.filesystem]\nrequired = true\nlibrary = \"/nonexistent/libcsi-proxy-filesystem.so\"\n");
  EXPECT_EQ(host.RunToExit({}), 1);
  EXPECT_THAT(LastLine(host.log()), HasSubstr("exiting: required group 'filesystem' failed to load: ")) << host.log();
}

TEST(ExitReason, AConfigurationThatIsRefused) {
  HostProcess host(kFilesystem, "no_such_key = 1\n");
  EXPECT_EQ(host.RunToExit({}), 1);
  EXPECT_THAT(LastLine(host.log()), HasSubstr("exiting: the configuration is refused: ")) << host.log();
  EXPECT_THAT(LastLine(host.log()), HasSubstr("host.no_such_key"));
}

TEST(ExitReason, AnAdminSocketThatCannotBeServed) {
  HostProcess host(kFilesystem, "admin_socket = \"/nonexistent/csi-proxy-admin.sock\"\n");
  EXPECT_EQ(host.RunToExit({}), 1);
  EXPECT_THAT(LastLine(host.log()), HasSubstr("exiting: the admin socket cannot be served: ")) << host.log();
}

TEST(ExitReason, AnAuditLogThatCannotBeOpened) {
  HostProcess host(kFilesystem, "audit_log = \"/nonexistent/audit.log\"\n");
  EXPECT_EQ(host.RunToExit({}), 1);
  EXPECT_THAT(LastLine(host.log()), HasSubstr("exiting: cannot open the audit log /nonexistent/audit.log"))
      << host.log();
}

}  // namespace
}  // namespace csi_proxy::testing
